"""A projection as a file's contents, and back: the JSON document of everything but the matrix
(:func:`metadata`), the matrix as the frame ``vector, feature, weight`` (:func:`matrix_frame`), and
the projection rebuilt from the two, checked (:func:`from_parts`).  Writing and reading the files
themselves: :mod:`sqlrp.registry.transfer`."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import InputError
from ..core.ir import Projection
from ..core.lazy import pd
from .validate import Parts, assemble, digest

COLUMNS = ("vector", "feature", "weight")  #: the columns of the matrix file, in order
FORMAT_NAME = "sqlrp-projection"
FORMAT_VERSION = 1


def metadata(projection: Projection) -> dict[str, Any]:
    """Everything about ``projection`` except its matrix entries, as JSON-ready values: method,
    params, seed, name, d, k, p, nnz, scale, ``vector_bias`` / ``vector_power`` (``None`` where
    they are the defaults 0 / 1) and the combiner (``"identity"`` for a linear projection, else its
    four arrays as :class:`sqlrp.core.ir.Combiner` holds them)."""
    lin, comb = projection.linear, projection.combiner
    combiner: str | dict[str, list] = "identity"
    if not comb.is_identity:
        combiner = {
            "term_component": comb.term_component.tolist(),
            "term_weight": comb.term_weight.tolist(),
            "factor_term": comb.factor_term.tolist(),
            "factor_vector": comb.factor_vector.tolist(),
        }
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": projection.name,
        "method": projection.method,
        "params": projection.params,
        "seed": projection.seed,
        "d": projection.d,
        "k": projection.k,
        "p": lin.p,
        "nnz": lin.nnz,
        "scale": float(projection.scale),
        "vector_bias": None if lin.bias is None else lin.bias.tolist(),
        "vector_power": None if lin.power is None else lin.power.tolist(),
        "combiner": combiner,
        "digest": digest(projection),
    }


def matrix_frame(projection: Projection) -> pd.DataFrame:
    """The linear stage's entries as the frame the matrix file holds: ``vector, feature, weight``,
    ordered by vector and feature (integers as int32, like the registry's columns)."""
    lin = projection.linear
    order = np.lexsort((lin.feature, lin.vector))
    return pd.DataFrame(
        {
            "vector": lin.vector[order].astype(np.int32),
            "feature": lin.feature[order].astype(np.int32),
            "weight": lin.weight[order],
        }
    )


def from_parts(frame: pd.DataFrame, meta: dict[str, Any], where: str = "the file") -> Projection:
    """The projection ``meta`` (:func:`metadata`) describes, with the entries of ``frame``
    (:func:`matrix_frame`); :class:`InputError` naming ``where`` if they do not fit together."""
    if meta.get("format") != FORMAT_NAME:
        raise InputError(f"{where} holds no sqlrp projection metadata (format {FORMAT_NAME!r})")
    if meta.get("version") != FORMAT_VERSION:
        raise InputError(
            f"{where} is sqlrp projection format version {meta.get('version')!r}; this sqlrp reads version "
            f"{FORMAT_VERSION}: upgrade sqlrp"
        )
    missing = [key for key in ("method", "d", "k", "p", "scale", "combiner") if key not in meta]
    if missing:
        raise InputError(f"{where}: the projection metadata lacks {', '.join(missing)}")
    if list(frame.columns) != list(COLUMNS):
        raise InputError(
            f"{where}: the matrix must have exactly the columns {', '.join(COLUMNS)}; it has "
            f"{', '.join(map(str, frame.columns)) or 'none'}"
        )
    if meta.get("nnz") is not None and int(meta["nnz"]) != len(frame):
        raise InputError(
            f"{where}: the matrix has {len(frame)} rows but the projection metadata says {meta['nnz']}; "
            "the matrix file and its metadata do not belong together"
        )
    if frame.isna().any().any():
        raise InputError(f"{where}: the matrix has empty (NULL) values")
    try:
        vector, feature = (_integers(frame[column], column) for column in ("vector", "feature"))
    except ValueError as exc:
        raise InputError(f"{where}: not a valid projection ({exc})") from None
    parts = Parts(
        method=meta["method"],
        d=meta["d"],
        k=meta["k"],
        p=meta["p"],
        scale=meta["scale"],
        vector=vector,
        feature=feature,
        weight=frame["weight"].to_numpy(),
        params=meta.get("params") or {},
        seed=meta.get("seed"),
        name=meta.get("name"),
        bias=meta.get("vector_bias"),
        power=meta.get("vector_power"),
        combiner=meta["combiner"],
    )
    projection = assemble(parts, where)  # the one validator (sqlrp.registry.validate)
    written = meta.get("digest")
    if written is not None and written != digest(projection):
        raise InputError(
            f"{where}: the projection was changed since sqlrp wrote it (its matrix, scale, combiner or parameters "
            "no longer match the digest written with it): export it again, or, if the edit was meant, delete the "
            '"digest" entry of its metadata'
        )
    return projection


def _integers(series: pd.Series, column: str) -> np.ndarray:
    values = series.to_numpy()
    if values.dtype.kind == "u" and len(values) and values.max() > np.iinfo(np.int64).max:
        raise ValueError(f"column {column} holds an index beyond int64")
    if values.dtype.kind == "O":
        values = np.array([int(v) if isinstance(v, (int, np.integer)) else float(v) for v in values])
    if values.dtype.kind not in "iu":
        as_float = values.astype(np.float64)
        if not np.all(np.isfinite(as_float)) or np.any(as_float != np.round(as_float)):
            raise ValueError(f"column {column} must hold whole numbers")
        values = as_float
    return values.astype(np.int64)


# ----------------------------------------------------------------------------------------------
# files
