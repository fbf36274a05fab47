"""A stored projection as a plain file that any warehouse can bulk-load, and back.

    sqlrp.registry.transfer.export_projection(db, "rp40", "rp40.parquet")   # or "rp40.csv"
    sqlrp.registry.transfer.import_projection(other_db, "rp40.parquet")      # stored as "rp40" there

**The file.**  The matrix file holds exactly the columns ``vector, feature, weight``: the linear
stage's non-zero entries, one row each (``vector`` and ``feature`` integers from 0, ``weight`` a
double), ordered by vector and feature.  It is what the registry's ``sqlrp_linear_entry`` holds
without the ``projection`` column, so a warehouse loads it as a table (``COPY INTO``, ``LOAD DATA``,
``read_parquet``) and the compiled SQL can join it as the matrix.

**The rest of the projection** -- method, params, seed, d, k, p, scale, the combiner's terms and
factors, and the per-vector bias and power of kernel methods -- is one JSON document (:func:`metadata`):

- ``.parquet``: inside the file, in the Parquet schema's key-value metadata under the key
  ``sqlrp.projection`` (one self-contained file; loaders ignore that metadata).  Needs pyarrow
  (``pip install 'sqlrp[parquet]'``).
- ``.csv``: in a sidecar file next to it, ``<path>.json`` (``rp40.csv`` -> ``rp40.csv.json``).  CSV
  has no place for it, and without it the file would not round-trip a kernel method.
- ``.sqlrp.json``: one JSON file, the document with the matrix's three columns as lists under
  ``entries`` (no pyarrow needed).  sqlrp writes one beside every file it projects into
  (``out.parquet`` -> ``out.parquet.sqlrp.json``, :mod:`sqlrp.core.files`).

The document holds the projection's digest (:mod:`sqlrp.registry.validate`): a file whose matrix or
metadata was edited since sqlrp wrote it is refused on import, like an edited registry; delete its
``"digest"`` entry to accept the edit.  Every import is checked by the registry's validator.

Any other file ending is refused (nothing is written in another format).  Floats are written so
that they read back bit for bit (Parquet doubles; CSV and JSON in Python's shortest round-trip
form), so an imported projection equals the exported one exactly: the same matrix, scale, combiner,
bias and power.  Composed projections (``craftmap``: two stages) are refused; export their stages
(``<name>__stage1``, ``<name>__stage2``) one by one, or copy them between databases with
:func:`sqlrp.copy_projection`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..backends import Backend, need
from ..core.errors import InputError, InvalidParameter, ProjectionExists
from ..core.files import database_files, refuse_files, replacing
from ..core.ir import Composed, Projection
from ..core.lazy import pd
from .file_format import COLUMNS, from_parts, matrix_frame, metadata
from .store import Registry, stage_names

FORMATS = (".parquet", ".csv")  #: the file endings export and import accept (and JSON_ENDING)
JSON_ENDING = ".sqlrp.json"  #: one JSON file: the metadata and, under ``entries``, the matrix's columns
METADATA_KEY = "sqlrp.projection"  #: Parquet key-value metadata key of the JSON document


def _format(path: Path) -> str:
    if path.name.lower().endswith(JSON_ENDING):
        return "json"
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InvalidParameter(
            f"cannot tell the file format of {str(path)!r}: name the file *.parquet (Parquet, needs "
            f"pip install 'sqlrp[parquet]'), *.csv (CSV, with the projection's metadata in <file>.json) "
            f"or *{JSON_ENDING} (one JSON file)"
        )
    return suffix[1:]


def sidecar(path: str | os.PathLike[str]) -> Path:
    """The JSON file next to a CSV export that holds the rest of the projection: ``<path>.json``."""
    p = Path(path)
    return p.with_name(p.name + ".json")


# ----------------------------------------------------------------------------------------------
# the projection <-> (matrix frame, metadata)


def write_projection(
    projection: Projection | Composed,
    path: str | os.PathLike[str],
    replace: bool = False,
    output: dict[str, Any] | None = None,
) -> list[Path]:
    """Write ``projection`` to ``path`` (``.parquet`` or ``.csv``, module docstring); returns the
    files written (for CSV the matrix and its ``.json`` sidecar).  An existing file is refused unless
    ``replace``; each file is written under a temporary name and renamed over the old one only once
    it is complete, so a failure leaves the old file whole.  ``output`` (JSON, beside a projected file):
    what the projected file holds -- its output type, form and names -- under the key ``"output"``."""
    target = Path(path)
    fmt = _format(target)
    if not replace:
        _refuse_existing([target, sidecar(target)] if fmt == "csv" else [target])
    if isinstance(projection, Composed):
        name = projection.name or "<name>"
        first, second = stage_names(name)
        raise InvalidParameter(
            f"{projection.name or 'this projection'!r} is composed of two projections (method {projection.method!r}) "
            f"and has no single matrix to write: export its stages {first!r} and {second!r} one by one, or copy it "
            "to another database with sqlrp.copy_projection (sqlrp projections copy)"
        )
    if not target.parent.is_dir():
        raise InputError(f"cannot write {str(target)!r}: there is no folder {str(target.parent)!r}")
    if fmt == "json":  # without pandas: written beside every projected file, where nothing else needs it
        lin = projection.linear
        order = np.lexsort((lin.feature, lin.vector))
        document = metadata(projection)
        if output is not None:
            document["output"] = output
        columns = (lin.vector[order].astype(int), lin.feature[order].astype(int), lin.weight[order].astype(float))
        document["entries"] = {c: v.tolist() for c, v in zip(COLUMNS, columns, strict=True)}  # exact doubles
        with replacing(target) as tmp:
            tmp.write_text(json.dumps(document) + "\n", encoding="utf-8")
        return [target]
    frame = matrix_frame(projection)
    meta = json.dumps(metadata(projection), indent=1)
    if fmt == "parquet":
        pa = need("pyarrow", "parquet", "Parquet export")
        pq = need("pyarrow.parquet", "parquet", "Parquet export")
        schema = pa.schema(  # type: ignore[attr-defined]
            [("vector", pa.int32()), ("feature", pa.int32()), ("weight", pa.float64())],  # type: ignore[attr-defined]
            metadata={METADATA_KEY: meta},
        )
        table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)  # type: ignore[attr-defined]
        table = table.replace_schema_metadata({METADATA_KEY: meta})  # no pandas metadata: a plain file
        with replacing(target) as tmp:
            pq.write_table(table, tmp)  # type: ignore[attr-defined]
        return [target]
    side = sidecar(target)
    with replacing(target) as tmp:
        # float repr is the shortest text that reads back as the same double
        out = frame.assign(weight=[repr(w) for w in frame["weight"].tolist()])
        out.to_csv(tmp, index=False, lineterminator="\n")
    with replacing(side) as tmp:
        tmp.write_text(meta + "\n", encoding="utf-8")
    return [target, side]


def _refuse_existing(paths: list[Path]) -> None:
    there = [str(p) for p in paths if p.exists() or p.is_symlink()]
    if there:
        raise ProjectionExists(
            f"{' and '.join(map(repr, there))} already exist{'s' if len(there) == 1 else ''}: nothing was written; "
            "pass --replace to overwrite, or choose another file"
        )


def is_projection_file(name: str | os.PathLike[str]) -> bool:
    """True if ``name`` is a file that may hold a projection: ``*.sqlrp.json``, or an existing
    ``*.parquet`` / ``*.csv`` export."""
    path = Path(name)
    if path.name.lower().endswith(JSON_ENDING):
        return True
    return path.suffix.lower() in FORMATS and path.is_file()


def read_projection(path: str | os.PathLike[str]) -> Projection:
    """The projection written to ``path`` by :func:`write_projection` (not stored anywhere)."""
    source = Path(path)
    fmt = _format(source)
    if not source.is_file():
        raise InputError(f"no file {str(source)!r} to import a projection from")
    if fmt == "parquet":
        pq = need("pyarrow.parquet", "parquet", "Parquet import")
        try:
            table = pq.read_table(source)  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a bad file
            raise InputError(f"cannot read {str(source)!r} as Parquet: {exc}") from None
        raw = (table.schema.metadata or {}).get(METADATA_KEY.encode())
        if raw is None:
            raise InputError(
                f"{str(source)!r} has no sqlrp projection metadata (Parquet key {METADATA_KEY!r}): "
                "it was not written by sqlrp's export"
            )
        meta = _json(raw.decode("utf-8"), str(source))
        frame = table.to_pandas()
        return from_parts(frame, meta, repr(str(source)))
    if fmt == "json":
        meta = _json(source.read_text(encoding="utf-8"), str(source))
        entries = meta.pop("entries", None)
        if not isinstance(entries, dict):
            raise InputError(
                f"{str(source)!r} holds no matrix (its 'entries'): a {JSON_ENDING} file is written by sqlrp "
                "beside a projected file, or by projections export (--to=NAME.sqlrp.json)"
            )
        try:
            frame = pd.DataFrame({c: entries[c] for c in COLUMNS})
        except (KeyError, ValueError) as exc:
            raise InputError(f"{str(source)!r}: the matrix entries need {', '.join(COLUMNS)} of one length") from exc
        return from_parts(frame, meta, repr(str(source)))
    side = sidecar(source)
    if not side.is_file():
        raise InputError(
            f"no file {str(side)!r}: a CSV projection needs the metadata file written next to it by sqlrp's export"
        )
    meta = _json(side.read_text(encoding="utf-8"), str(side))
    try:
        # weights as text, parsed by Python's float(), which is correctly rounded: the exact double
        # written (pandas' own parser is not, before pandas 3, without float_precision="round_trip")
        frame = pd.read_csv(
            source, dtype={"vector": np.int64, "feature": np.int64, "weight": str}, keep_default_na=False
        )
        if "weight" in frame.columns:
            frame["weight"] = np.array([float(w) for w in frame["weight"].tolist()], dtype=np.float64)
    except OverflowError:
        raise InputError(f"cannot read {str(source)!r}: a vector or feature index does not fit int64") from None
    except (ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"cannot read {str(source)!r} as a projection matrix: {exc}") from None
    return from_parts(frame, meta, repr(str(source)))


def _json(text: str, where: str) -> dict[str, Any]:
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where!r} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise InputError(f"{where!r} holds no sqlrp projection metadata")
    return meta


# ----------------------------------------------------------------------------------------------
# the API


def export_projection(
    db: Backend | None, name: str | Projection, path: str | os.PathLike[str], replace: bool = False
) -> list[Path]:
    """Write the projection stored as ``name`` in ``db`` to ``path`` (``.parquet``: one file with the
    metadata inside; ``.csv``: the matrix plus ``<path>.json``).  ``name`` may also be a
    :class:`~sqlrp.core.ir.Projection` in memory (``db`` is then not used).  An existing file is refused
    unless ``replace``.  Returns the files written.

    :param db: the connection that stores the projection (``None`` when ``name`` is the projection itself).
    :param name: the stored projection's name, or a projection in memory.
    :param path: the file to write: ``.parquet`` (needs ``sqlrp[parquet]``), ``.csv`` (plus ``<path>.json``)
        or ``.sqlrp.json``.
    :param replace: overwrite existing files.
    :returns: the files written (the ``.csv`` and its ``.json`` sidecar, or the one file).
    """
    if isinstance(name, (Projection, Composed)):
        projection: Projection | Composed = name
    else:
        if db is None:
            raise InvalidParameter("give the database that stores the projection, or pass the projection itself")
        fmt = _format(Path(path))  # a bad file name or an existing file fails before the database is read
        written = [Path(path), sidecar(path)] if fmt == "csv" else [Path(path)]
        if not replace:
            _refuse_existing(written)
        database = [(p, "the database file") for p in database_files(db)]
        refuse_files([(p, "the export file") for p in written], database)
        projection = Registry.of(db).load(name)
    return write_projection(projection, path, replace=replace)


def import_projection(
    db: Backend, path: str | os.PathLike[str], name: str | None = None, replace: bool = False
) -> Projection:
    """Store the projection in the file ``path`` (written by :func:`export_projection`) in ``db``'s
    registry as ``name`` (default: the name it was exported under, else the file's stem); an
    existing projection of that name raises :class:`~sqlrp.core.errors.ProjectionExists` unless
    ``replace``.  Returns the stored projection.

    :param db: the connection whose registry stores it.
    :param path: a ``.parquet``, ``.csv`` (its ``<path>.json`` beside it) or ``.sqlrp.json`` file.
    :param name: the stored name (default: the name it was exported under, else the file's stem).
    :param replace: replace a stored projection of that name.
    :returns: the projection, as stored.
    """
    projection = read_projection(path)
    target = name or projection.name or Path(path).stem
    Registry.of(db).save(projection, target, replace=replace)
    return projection


__all__ = [
    "COLUMNS",
    "FORMATS",
    "JSON_ENDING",
    "METADATA_KEY",
    "export_projection",
    "from_parts",
    "import_projection",
    "is_projection_file",
    "matrix_frame",
    "metadata",
    "read_projection",
    "sidecar",
    "write_projection",
]
