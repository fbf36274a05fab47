"""One validator for a projection, whatever its source, and the digest stored with it.

A projection reaches the compiler from the registry's rows (:mod:`sqlrp.registry.store`), from a file
(:mod:`sqlrp.registry.file_format`), as an object built in Python, or -- its matrix only -- from a
warehouse table (``--matrix TABLE``).  Each source is read into the same raw :class:`Parts` and
checked here, by :func:`assemble`, before any SQL is compiled from it: whole-number shapes, a finite
positive scale, finite weights, indexes inside ``[0, d)`` / ``[0, p)`` / ``[0, k)``, no entry twice, and
a combiner whose factors read vectors and terms that exist and that gives every output a term (an
output without one is a column of zeros; only a Maclaurin map drawn with ``sampling="paper"`` leaves
some on purpose: 001 Algorithm 1 gives an output of degree ``N > r`` the weight ``a_N = 0``).  A
defect is one :class:`~sqlrp.core.errors.InputError` line naming the projection and what is wrong.

**The digest** (:func:`digest`) is a SHA-256 over a canonical serialisation of what determines the
outputs and the stored description: method, d, k, p, seed, parameters (JSON, keys sorted, every
number as the ``repr`` of its double so that PostgreSQL's JSONB, which rewrites ``1e300`` as digits,
hashes alike), the scale (its eight IEEE-754 bytes), the linear entries sorted by ``(vector,
feature)`` (little-endian int64 / float64 bytes, so every double round-trips exactly), the
per-vector bias and power (0 and 1 where unset), and the combiner's terms in order with their
factors grouped by term.  It is computed in Python from the rows as read, so it is the same on
every engine.  The registry writes it with the projection and compares it on every load: a matrix
changed outside sqlrp is refused (:class:`StoredProjectionChanged`) until it is re-created or the
edit is accepted (:func:`sqlrp.accept_projection`, ``sqlrp projections accept NAME``).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlglot import exp

from ..core.errors import InputError
from ..core.ir import Combiner, Composed, LinearStage, Projection
from ..core.nodes import col, ident

DIGEST_TAG = "sqlrp-digest-1"  #: the serialisation's version, hashed first
# A composed projection (sqlrp.core.ir.Composed) is stored as its two stages under derived names plus one
# sqlrp_projection row (p = 0, scale = 1, no matrix rows) whose params hold the stage names under this key.
STAGES_KEY = "_stages"


def stage_names(name: str) -> list[str]:
    """Names under which the stages of the composed projection ``name`` are stored."""
    return [f"{name}__stage1", f"{name}__stage2"]


class StoredProjectionChanged(InputError):
    """A stored projection's rows no longer match the digest written with them (edited outside sqlrp),
    or a projection given in memory differs from the stored one of its name that the SQL would join."""


@dataclass
class Parts:
    """A projection as a source holds it, before it is checked: plain values and arrays that may be
    wrong in any way (NaN, out of range, the wrong type).  ``combiner`` is ``"identity"`` or the four
    arrays of :class:`~sqlrp.core.ir.Combiner`; ``term_ids`` (the registry's ``term`` column) must be
    ``0 .. n-1`` in order where given."""

    method: Any
    d: Any
    k: Any
    p: Any
    scale: Any
    vector: Any
    feature: Any
    weight: Any
    params: Any = field(default_factory=dict)
    seed: Any = None
    name: Any = None
    bias: Any = None
    power: Any = None
    combiner: Any = "identity"
    term_ids: Any = None


class _Bad(ValueError):
    """What is wrong, for :func:`assemble`'s message."""


def has_repeats(keys: np.ndarray) -> bool:
    """True if ``keys`` (whole numbers) holds a value more than once: sorted, each compared with the next.
    Not ``len(np.unique(keys)) != len(keys)``: NumPy 2's ``unique`` imports ``numpy.ma`` (for its masked
    array check), 40 ms of the start-up of ``sqlrp project`` that loads a stored projection (issue 42)."""
    ordered = np.sort(np.ravel(keys))
    return bool(ordered.size > 1 and np.any(ordered[1:] == ordered[:-1]))


def _count(value: Any, key: str, minimum: int = 1) -> int:
    """A count (d, k, p): a whole number >= ``minimum``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise _Bad(f"{key} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _numbers(values: Any, what: str) -> np.ndarray:
    """``values`` as float64, or :class:`_Bad` naming ``what`` (text in a number column, ...)."""
    try:
        out = np.asarray(values if values is not None else [], dtype=np.float64).reshape(-1)
    except (TypeError, ValueError, OverflowError):
        raise _Bad(f"{what}: a value that is not a number") from None
    if not np.all(np.isfinite(out)):
        raise _Bad(f"{what}: a value that is not a finite number (NaN, infinity or NULL)")
    return out


def _indexes(values: Any, what: str, low: int, high: int | None, bound: str) -> np.ndarray:
    """Whole numbers in ``[low, high)`` (``high`` None: no upper bound) as int64."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        if values.dtype.kind == "u" and len(values) and values.max() > np.iinfo(np.int64).max:
            raise _Bad(f"{what}: an index beyond int64")
        out = values.astype(np.int64).reshape(-1)
    else:
        as_float = _numbers(values, what)
        if np.any(as_float != np.round(as_float)):
            raise _Bad(f"{what}: a value that is not a whole number")
        if len(as_float) and (as_float.min() < low or (high is not None and as_float.max() >= high)):
            raise _Bad(_range(what, low, high, bound, as_float))
        out = as_float.astype(np.int64)
    if len(out) and (out.min() < low or (high is not None and out.max() >= high)):
        raise _Bad(_range(what, low, high, bound, out))
    return out


def _range(what: str, low: int, high: int | None, bound: str, values: np.ndarray) -> str:
    """What :func:`_indexes` says of a value outside its range."""
    shown = _outside(values, low, high)
    return f"{what} out of range [{low}, {bound}): {shown}" if high is not None else f"{what} below {low}: {shown}"


def _outside(values: np.ndarray, low: int, high: int | None) -> str:
    bad = values[(values < low) | (values >= (high if high is not None else np.inf))]
    first = bad[0].item()
    return repr(int(first) if float(first).is_integer() else first)


def _scale(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _Bad(f"scale must be a finite positive number, got {value!r}")
    if not math.isfinite(float(value)) or float(value) <= 0:
        raise _Bad(f"scale must be a finite positive number, got {float(value)!r}")
    return float(value)


def _combiner(comb: Any, k: int, p: int, term_ids: Any) -> Combiner:
    """The combiner ``comb`` describes, its factors reading vectors and terms that exist."""
    if isinstance(comb, str) and comb == "identity":
        if k != p:
            raise _Bad(f"a linear projection has k = p outputs; it says k = {k}, p = {p}")
        return Combiner.identity(k)
    if isinstance(comb, Combiner):
        comb = {
            "term_component": comb.term_component,
            "term_weight": comb.term_weight,
            "factor_term": comb.factor_term,
            "factor_vector": comb.factor_vector,
        }
    if not isinstance(comb, dict):
        raise _Bad("combiner must be 'identity' or a JSON object")
    missing = [key for key in ("term_component", "term_weight", "factor_term", "factor_vector") if key not in comb]
    if missing:
        raise _Bad(f"the combiner lacks {', '.join(missing)}")
    weight = _numbers(comb["term_weight"], "a combiner term's weight")
    component = _indexes(comb["term_component"], "a combiner term's component", 0, k, f"k = {k}")
    if len(component) != len(weight):
        raise _Bad("the combiner's terms have as many components as weights")
    if term_ids is not None:
        ids = _indexes(term_ids, "a combiner term's number", 0, None, "")
        if not np.array_equal(ids, np.arange(len(ids))):
            raise _Bad("the combiner's terms are not numbered 0, 1, 2, ... (a term is missing or repeated)")
    factor_term = _indexes(comb["factor_term"], "a combiner factor's term", 0, len(weight), "the terms")
    factor_vector = _indexes(comb["factor_vector"], "a combiner factor's vector", 0, p, f"p = {p}")
    if len(factor_term) != len(factor_vector):
        raise _Bad("the combiner's factors have as many terms as vectors")
    return Combiner(
        k=k, term_component=component, term_weight=weight, factor_term=factor_term, factor_vector=factor_vector
    )


def _zero_outputs_allowed(method: str, params: dict[str, Any]) -> bool:
    """Outputs without a term are made on purpose only by a Maclaurin map drawn over every degree
    (``sampling="paper"`` untruncated: an output of degree ``N > r`` has ``a_N = 0``), and by one of
    degree 0 (the constant kernel: one output holds it, ``z.z = 1``, the others are 0)."""
    if method != "maclaurin":
        return False
    return params.get("degree") == 0 or (params.get("sampling") == "paper" and not params.get("truncate"))


def assemble(parts: Parts, where: str, repeats: bool = False) -> Projection:
    """The projection ``parts`` describe, checked; :class:`~sqlrp.core.errors.InputError`
    ``"<where>: not a valid projection (<what is wrong>)"`` otherwise.  ``where`` names the source:
    ``"stored projection 'rp'"``, ``"'rp.parquet'"``, ``"projection 'rp'"``.  ``repeats``: an entry
    ``(vector, feature)`` may be given more than once (its weights add up, as the compiler and
    :meth:`~sqlrp.core.ir.LinearStage.dense` read it): allowed in an object, never in a stored or
    written matrix (the registry's key, the file's rows)."""
    try:
        method = parts.method
        if not isinstance(method, str) or not method:
            raise _Bad(f"method must be a name, got {method!r}")
        params = parts.params if parts.params is not None else {}
        if not isinstance(params, dict):
            raise _Bad(f"params must be a JSON object, got {type(params).__name__}")
        seed = parts.seed
        if seed is not None and (isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer))):
            raise _Bad(f"seed must be a whole number or empty, got {seed!r}")
        d, k = _count(parts.d, "d"), _count(parts.k, "k")
        p = _count(parts.p, "p", minimum=0)  # 0: a Maclaurin map of degree 0 is its constant term alone
        scale = _scale(parts.scale)
        weight = _numbers(parts.weight, "the matrix's weights")
        vector = _indexes(parts.vector, "the matrix's vector index", 0, p, f"p = {p}")
        feature = _indexes(parts.feature, "the matrix's feature index", 0, d, f"d = {d}")
        if not (len(vector) == len(feature) == len(weight)):
            raise _Bad("the matrix's vector, feature and weight columns differ in length")
        if not repeats and has_repeats(vector * np.int64(d) + feature):
            raise _Bad("the matrix has more than one entry for some (vector, feature)")
        bias = power = None
        if parts.bias is not None:
            bias = _numbers(parts.bias, "a vector's bias")
            if bias.shape != (p,):
                raise _Bad(f"the vectors' bias must have p = {p} values, it has {len(bias)}")
        if parts.power is not None:
            power = _indexes(parts.power, "a vector's power", 1, None, "")
            if power.shape != (p,):
                raise _Bad(f"the vectors' power must have p = {p} values, it has {len(power)}")
        linear = LinearStage(d=d, p=p, vector=vector, feature=feature, weight=weight, bias=bias, power=power)
        combiner = _combiner(parts.combiner, k, p, parts.term_ids)
        if not _zero_outputs_allowed(method, params):
            empty = np.flatnonzero(np.bincount(combiner.term_component, minlength=k) == 0)
            if len(empty):
                raise _Bad(
                    f"output {int(empty[0])} has no combiner term, so it would be a column of zeros"
                    + (f" ({len(empty)} outputs)" if len(empty) > 1 else "")
                )
        # the output function and its scale (params "function", "function_scale") are checked by the IR
        return Projection(
            method=method,
            linear=linear,
            combiner=combiner,
            scale=scale,
            params=dict(params),
            seed=seed,
            name=parts.name,
        )
    except _Bad as exc:
        raise InputError(f"{where}: not a valid projection ({exc})") from None
    except (ValueError, TypeError, OverflowError) as exc:  # the IR's own checks
        raise InputError(f"{where}: not a valid projection ({exc})") from None


def parts_of(projection: Projection) -> Parts:
    """The raw parts of a projection built in memory (to check it like any other source)."""
    lin = projection.linear
    return Parts(
        method=projection.method,
        d=projection.linear.d,
        k=projection.combiner.k,
        p=lin.p,
        scale=projection.scale,
        vector=lin.vector,
        feature=lin.feature,
        weight=lin.weight,
        params=projection.params,
        seed=int(projection.seed) if isinstance(projection.seed, np.integer) else projection.seed,
        name=projection.name,
        bias=lin.bias,
        power=lin.power,
        combiner=projection.combiner,
    )


def validate(
    projection: Projection | Composed, where: str | None = None, stored: bool = False
) -> Projection | Composed:
    """``projection`` (an object built in Python, or returned by any source) checked as the registry
    and file import check theirs: itself, if sound; else :class:`~sqlrp.core.errors.InputError`.
    ``stored``: it is about to be stored, where an entry given twice has no place (:func:`assemble`)."""
    where = where or (f"projection {projection.name!r}" if projection.name else "the projection given")
    if isinstance(projection, Composed):
        for i, stage in enumerate(projection.stages, start=1):
            validate(stage, f"{where}, stage {i}", stored)
        if projection.first.k != projection.second.d:
            raise InputError(
                f"{where}: not a valid projection (its first stage outputs {projection.first.k} values, the "
                f"second expects {projection.second.d})"
            )
        return projection
    if not isinstance(projection, Projection):
        raise InputError(f"{where}: not a projection ({type(projection).__name__})")
    assemble(parts_of(projection), where, repeats=not stored)
    return projection


# ----------------------------------------------------------------------------------------------
# the digest


def canonical_json(value: Any) -> Any:
    """``value`` (parsed JSON) in the form the digest hashes: keys sorted (by ``json.dumps``), every
    number as the ``repr`` of its double (``3``, ``3.0`` and JSONB's ``3.0`` alike; ``1e300`` and
    JSONB's 301 digits alike), booleans, strings and null as they are."""
    if isinstance(value, dict):
        return {str(k): canonical_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical_json(v) for v in value]
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, str):
        return bool(value) if isinstance(value, np.bool_) else value
    if isinstance(value, (int, float, np.integer, np.floating)):
        try:
            return {"#": repr(float(value))}
        except OverflowError:
            return {"#": str(int(value))}
    return str(value)


def _header(method: str, d: int, k: int, p: int, seed: int | None, params: dict[str, Any], counts: list[int]) -> bytes:
    head = [DIGEST_TAG, method, int(d), int(k), int(p), None if seed is None else int(seed), canonical_json(params)]
    return json.dumps([*head, counts], sort_keys=True, separators=(",", ":")).encode()


def digest(projection: Projection, params: dict[str, Any] | None = None) -> str:
    """The SHA-256 (hex) of ``projection``'s canonical form (module docstring); ``params``: the
    parameters as stored, where they differ from the object's (a composition's stage names)."""
    lin, comb = projection.linear, projection.combiner
    order = np.lexsort((lin.feature, lin.vector))
    forder = np.argsort(comb.factor_term, kind="stable")
    bias = lin.bias if lin.bias is not None else np.zeros(lin.p)
    power = lin.power if lin.power is not None else np.ones(lin.p, dtype=np.int64)
    h = hashlib.sha256()
    counts = [lin.nnz, comb.n_terms, len(comb.factor_term)]
    h.update(
        _header(
            projection.method,
            lin.d,
            comb.k,
            lin.p,
            projection.seed,
            projection.params if params is None else params,
            counts,
        )
    )
    h.update(struct.pack("<d", float(projection.scale)))
    for array, kind in (
        (lin.vector[order], "<i8"),
        (lin.feature[order], "<i8"),
        (lin.weight[order], "<f8"),
        (bias, "<f8"),
        (power, "<i8"),
        (comb.term_component, "<i8"),
        (comb.term_weight, "<f8"),
        (comb.factor_term[forder], "<i8"),
        (comb.factor_vector[forder], "<i8"),
    ):
        h.update(np.ascontiguousarray(array, dtype=kind).tobytes())
    return h.hexdigest()


def composed_digest(method: str, d: int, k: int, seed: int | None, params: dict[str, Any], stages: list[str]) -> str:
    """The digest of a composition's own row: its description (``params`` with the stage names) and
    the digests of its ``stages``, in order."""
    h = hashlib.sha256()
    h.update(_header(method, d, k, 0, seed, params, [len(stages)]))
    for stage in stages:
        h.update(stage.encode())
    return h.hexdigest()


def digest_of(projection: Projection | Composed, stored_params: dict[str, Any] | None = None) -> str:
    """The digest of a projection or a composition (whose stages carry their stored names)."""
    if isinstance(projection, Projection):
        return digest(projection, stored_params)
    names = [s.name or n for s, n in zip(projection.stages, stage_names(projection.name or ""), strict=True)]
    params = stored_params if stored_params is not None else {**projection.params, STAGES_KEY: names}
    return composed_digest(
        projection.method,
        projection.d,
        projection.k,
        projection.seed,
        params,
        [digest_of(stage) for stage in projection.stages],
    )


def check_matrix_table(db: Any, projection: Projection, matrix: str) -> None:
    """``--matrix TABLE`` where the table is in ``db`` itself: its rows ``(vector, feature, weight)`` are
    read and checked to be ``projection``'s matrix (with its scale and combiner they would otherwise
    give other numbers without a word).  A table elsewhere (a warehouse the SQL is compiled for, a
    catalog-qualified name) cannot be read here and is left to the warehouse."""
    names = matrix.split(".")
    if len(names) > 2 or not all(names):
        return  # catalog.schema.table, or a malformed name: the compiler refuses or the warehouse holds it
    table, schema = names[-1], (names[0] if len(names) == 2 else None)
    if not db.table_exists(table, schema):
        return
    where = f"matrix table {matrix!r}"
    have = {c.name for c in db.columns(table, schema)}
    missing = [c for c in ("vector", "feature", "weight") if c not in have]
    if missing:
        raise InputError(
            f"{where} lacks the column{'s' if len(missing) > 1 else ''} {', '.join(missing)}: it must "
            "hold vector, feature, weight as sqlrp projections export writes them"
        )
    select = exp.select(col("vector"), col("feature"), col("weight")).from_(
        exp.Table(this=ident(table), db=ident(schema) if schema else None)
    )
    rows = db.fetchall(db.sql_dialect.render(select))
    try:
        entries = np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=np.float64).reshape(-1, 3)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{where}: not a valid matrix (its rows hold values that are not numbers)") from None
    parts = parts_of(projection)
    parts.vector, parts.feature, parts.weight = entries[:, 0], entries[:, 1], entries[:, 2]
    loaded = assemble(parts, where)
    if digest(loaded) != digest(projection):
        which = f"projection {projection.name!r}" if projection.name else "the projection of this call"
        raise InputError(
            f"{where} does not hold the matrix of {which} (other entries or weights: {len(rows)} rows where it has "
            f"{projection.linear.nnz}): the SQL would join its weights with that projection's scale and combiner; "
            "give --projection (the stored projection or the exported file the table was loaded from), or load "
            "that projection's export into the table again"
        )


__all__ = [
    "Parts",
    "StoredProjectionChanged",
    "assemble",
    "canonical_json",
    "check_matrix_table",
    "composed_digest",
    "digest",
    "digest_of",
    "parts_of",
    "validate",
]
