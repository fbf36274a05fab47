"""A projection as a file's contents, and back: the JSON document of everything but the matrix
(:func:`metadata`), the matrix as the frame ``vector, feature, weight`` (:func:`matrix_frame`), and
the projection rebuilt from the two, checked (:func:`from_parts`).  Writing and reading the files
themselves: :mod:`sqlrp.registry.transfer`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.errors import InputError
from ..core.ir import Combiner, LinearStage, Projection
from ..core.lazy import pd

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
    if not np.all(np.isfinite(frame["weight"].to_numpy(dtype=np.float64))):
        raise InputError(f"{where}: the matrix has weights that are not finite numbers")
    if frame.duplicated(["vector", "feature"]).any():
        raise InputError(f"{where}: the matrix has more than one row for some (vector, feature)")
    try:
        d, k = (_count(meta[key], key) for key in ("d", "k"))
        p = _count(meta["p"], "p", minimum=0)  # 0: a Maclaurin map of degree 0 is its constant term alone
        scale = meta["scale"]
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"scale must be a finite positive number, got {scale!r}")
        params = meta.get("params") or {}
        if not isinstance(params, dict):
            raise ValueError(f"params must be a JSON object, got {type(params).__name__}")
        vector = _integers(frame["vector"], "vector")
        feature = _integers(frame["feature"], "feature")
        if len(vector) and (vector.min() < 0 or vector.max() >= p):
            raise ValueError(f"vector index out of range [0, p = {p}): {int(vector.max())}")
        if len(feature) and (feature.min() < 0 or feature.max() >= d):
            raise ValueError(f"feature index out of range [0, d = {d}): {int(feature.max())}")
        linear = LinearStage(
            d=d,
            p=p,
            vector=vector,
            feature=feature,
            weight=frame["weight"].to_numpy(dtype=np.float64),
            bias=meta.get("vector_bias"),
            power=meta.get("vector_power"),
        )
        combiner = _combiner(meta["combiner"], k, linear.p)
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise InputError(f"{where}: not a valid projection ({exc})") from None
    return Projection(
        method=str(meta["method"]),
        linear=linear,
        combiner=combiner,
        scale=float(scale),
        params=dict(params),
        seed=meta.get("seed"),
        name=meta.get("name"),
    )


def _combiner(comb: Any, k: int, p: int) -> Combiner:
    """The combiner the metadata describes, its factors reading vectors and terms that exist."""
    if comb == "identity":
        if k != p:
            raise ValueError(f"a linear projection has k = p outputs; the metadata says k = {k}, p = {p}")
        return Combiner.identity(k)
    if not isinstance(comb, dict):
        raise ValueError("combiner must be 'identity' or a JSON object")
    arrays = ("term_component", "term_weight", "factor_term", "factor_vector")
    combiner = Combiner(k=k, **{key: comb[key] for key in arrays})
    if len(combiner.factor_vector) and (combiner.factor_vector.min() < 0 or combiner.factor_vector.max() >= p):
        raise ValueError(f"a combiner factor reads a vector outside [0, p = {p})")
    terms = combiner.factor_term
    if len(terms) and (terms.min() < 0 or terms.max() >= combiner.n_terms):
        raise ValueError("a combiner factor belongs to a term that does not exist")
    return combiner


def _count(value: Any, key: str, minimum: int = 1) -> int:
    """A metadata count (d, k, p): a whole number >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{key} must be a whole number >= {minimum}, got {value!r}")
    return value


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
