"""A stored projection's rows read back (:mod:`sqlrp.registry.store` loads through these): its linear
entries, per-vector bias and power and combiner as :class:`~sqlrp.registry.validate.Parts` for the one
validator (:func:`read_parts`), its parameters (:func:`parse_params`), and the digest stored with it
compared with the one computed from the rows (:func:`same_digest`).  A defect is one
:class:`~sqlrp.core.errors.InputError` line naming the projection and what to do (:func:`fix_hint`)."""

from __future__ import annotations

import json

import numpy as np

from ..backends import Backend
from ..core.errors import InputError
from .validate import Parts, StoredProjectionChanged, has_repeats


def read_parts(backend: Backend, name: str, params: dict, row: tuple) -> Parts:
    """The rows of the stored projection ``name`` as :class:`~sqlrp.registry.validate.Parts`: ``row`` is
    its ``(method, d, k, p, seed, scale)`` as ``sqlrp_projection`` holds them, ``params`` its parameters."""
    method, d, k, p, seed, scale = row
    where = f"stored projection {name!r}"

    def rows(sql: str) -> np.ndarray:
        return read_array(backend, sql, name, 3, where)

    entries = rows(
        "SELECT vector, feature, weight FROM sqlrp_linear_entry WHERE projection = ? ORDER BY vector, feature"
    )
    vectors = rows("SELECT vector, bias, power FROM sqlrp_linear_vector WHERE projection = ? ORDER BY vector")
    terms = rows("SELECT term, component, weight FROM sqlrp_combiner_term WHERE projection = ? ORDER BY term")
    factors = rows(
        "SELECT term, position, vector FROM sqlrp_combiner_factor WHERE projection = ? ORDER BY term, position"
    )
    bias = power = None
    if len(vectors):
        try:
            count = as_int(p)
            index = vectors[:, 0]
            if (
                not isinstance(count, int)
                or count < 0
                or not np.all(np.isfinite(index))
                or np.any(index != np.round(index))
            ):
                raise ValueError
            if index.min() < 0 or index.max() >= count or has_repeats(index):
                raise ValueError
        except ValueError:
            raise InputError(
                f"{where}: not a valid projection (sqlrp_linear_vector holds a vector outside [0, p = {p}) or "
                f"one twice){fix_hint(name)}"
            ) from None
        bias, power = np.zeros(count), np.ones(count)
        bias[index.astype(np.int64)] = vectors[:, 1]
        power[index.astype(np.int64)] = vectors[:, 2]
        bias = bias if np.any(bias != 0) or not np.all(np.isfinite(bias)) else None
        power = power if np.any(power != 1) else None
    return Parts(
        method=method,
        d=as_int(d),
        k=as_int(k),
        p=as_int(p),
        scale=scale,
        vector=entries[:, 0],
        feature=entries[:, 1],
        weight=entries[:, 2],
        params=params,
        seed=as_int(seed),
        name=name,
        bias=bias,
        power=power,
        combiner={
            "term_component": terms[:, 1],
            "term_weight": terms[:, 2],
            "factor_term": factors[:, 0],
            "factor_vector": factors[:, 2],
        },
        term_ids=terms[:, 0],
    )


def read_array(backend: Backend, sql: str, name: str, width: int, where: str = "") -> np.ndarray:
    """The rows ``sql`` returns for ``name``, as a ``width``-column float array (NULL as NaN)."""
    rows = backend.fetchall(sql, [name])
    try:
        return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float64).reshape(
            -1, width
        )
    except (TypeError, ValueError, OverflowError):
        raise InputError(
            f"{where or repr(name)}: not a valid projection (its rows hold values that are not numbers){fix_hint(name)}"
        ) from None


def as_int(value: object) -> object:
    """A count or seed as read: a NumPy or driver integer as ``int``; anything else as it is (for the
    validator to refuse)."""
    return int(value) if isinstance(value, (np.integer, int)) and not isinstance(value, bool) else value


def fix_hint(name: str) -> str:
    """What to do about a stored projection that is not sound, said after its error."""
    return f"; re-create it with --replace, or drop it (sqlrp projections drop {name!r})"


def parse_params(raw: object, where: str, name: str) -> dict:
    """The stored parameters (JSON text, or a dict where the driver parses JSON) as a dict."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise InputError(
                f"{where}: not a valid projection (its params are not valid JSON){fix_hint(name)}"
            ) from None
    if not isinstance(raw, dict):
        raise InputError(
            f"{where}: not a valid projection (its params must be a JSON object, got {type(raw).__name__})"
            + fix_hint(name)
        )
    return raw


def same_digest(name: str, stored: object, computed: str) -> None:
    """Refuse a stored projection whose rows no longer give the digest stored with them."""
    accept = f"accept it (sqlrp projections accept {name!r}, accept_projection)"
    if stored is None:
        raise StoredProjectionChanged(
            f"stored projection {name!r} has no digest (stored before registry version 5 and not upgraded, or "
            f"edited outside sqlrp): if its rows are as meant, {accept}; else re-create it with --replace"
        )
    if stored != computed:
        raise StoredProjectionChanged(
            f"stored projection {name!r} was changed outside sqlrp: its matrix, scale, combiner or parameters no "
            f"longer match the digest stored with it; re-create it with --replace, or, if the edit was meant, "
            f"{accept}"
        )


__all__ = ["as_int", "fix_hint", "parse_params", "read_array", "read_parts", "same_digest"]
