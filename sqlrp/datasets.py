"""Data that ships with sqlrp, so that ``sqlrp demo`` runs on the light core (no scikit-learn).

``data/digits.csv.gz`` is scikit-learn's copy (``sklearn/datasets/data/digits.csv.gz``, BSD-3-Clause)
of the UCI "Optical Recognition of Handwritten Digits" test set (Alpaydin & Kaynak, 1998; CC BY 4.0):
1,797 rows of 64 pixel counts (0..16), the digit (0..9) in the last column.  57 KB.
"""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)``: the 1,797 x 64 pixel counts as float64 and the digits as int64, in file order
    (the same rows, in the same order, as ``sklearn.datasets.load_digits()``)."""
    with resources.files("sqlrp").joinpath("data/digits.csv.gz").open("rb") as raw, gzip.open(raw, "rt") as text:
        table = np.loadtxt(text, delimiter=",")
    return table[:, :-1].astype(np.float64), table[:, -1].astype(np.int64)
