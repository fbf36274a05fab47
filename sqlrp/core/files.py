"""Files as tables and as outputs, on DuckDB.

**Input.**  A table name that ends like a data file (``emb.parquet``, ``rows.csv``, ``part-*.parquet``,
``q.jsonl``, ``x.csv.gz``) and is not a table of the database names that file, or every file a glob
matches.  DuckDB reads it through a temporary view named exactly as the path was given (so every
query sqlrp renders, ``FROM "emb.parquet"``, reads the file), defined as
``read_parquet('/abs/emb.parquet')`` / ``read_csv`` / ``read_json`` with the absolute path as a
quoted string literal (:func:`reader`).  ``read_file(db, path)`` (``--input PATH``) does the same for
any ending: Parquet is told by its magic bytes, JSON by a leading ``{`` or ``[``, else CSV.

**Output.**  ``--into out.parquet`` (``.csv``, ``.json``) is written by DuckDB's own
``COPY (query) TO`` under a temporary name in the same folder, checked, then renamed
(:func:`sqlrp.pipeline.materialise.write_file`).  The projection used is written beside it,
``out.parquet.sqlrp.json`` (:func:`definition_path`; the JSON format of :mod:`sqlrp.registry.transfer`), so
that queries can later be projected the same way (``--projection out.parquet.sqlrp.json``).
"""

from __future__ import annotations

import contextlib
import difflib
import glob
import os
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from sqlglot import exp

from .errors import InputError, InvalidParameter
from .names import alive, host_tag

DB = TypeVar("DB")  #: a backend, handed back as it came

READERS = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json"}
_ENDINGS = {".parquet": "parquet", ".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
_COMPRESSED = (".gz", ".zst")
OUTPUTS = {".parquet": "parquet", ".csv": "csv", ".json": "json"}  #: --into endings DuckDB's COPY writes
GLOB = frozenset("*?[")


def file_format(name: str) -> str | None:
    """``parquet``, ``csv`` or ``json`` if ``name`` ends like such a file (CSV and JSON may be
    compressed: ``.csv.gz``), else ``None``."""
    lower = name.lower()
    for ending in _COMPRESSED:
        if lower.endswith(ending) and not lower.endswith(".parquet" + ending):
            lower = lower[: -len(ending)]
            break
    return _ENDINGS.get(os.path.splitext(lower)[1])


def output_format(name: str) -> str | None:
    """The format ``--into name`` writes, if ``name`` ends like a file (``.parquet``, ``.csv``,
    ``.json``); ``None`` for a table name."""
    return OUTPUTS.get(os.path.splitext(name.lower())[1])


#: endings of files sqlrp does not write (a table of that name would be a silent surprise); a table
#: name with another dot in it (``emb.v2``, ``v1.2``) is a table name
OTHER_FILES = (
    "xlsx", "xls", "ods", "tsv", "txt", "dat", "feather", "arrow", "ipc", "avro", "orc", "jsonl", "ndjson", "xml",
    "gz", "zip", "bz2", "xz", "zst", "tar", "db", "sqlite", "duckdb", "pkl", "pickle", "npy", "npz", "h5", "hdf5",
    "parq", "pq", "parquett", "parqet", "parquest", "cvs", "jsn", "jason",
)  # fmt: skip
FILE_ENDING = re.compile(r"\.(" + "|".join(OTHER_FILES) + r")$", re.IGNORECASE)


def refuse_file_ending(into: str, instead: str = "name a table without a file ending") -> None:
    """Refuse, before any work, an output ``into`` that ends like a file sqlrp does not write
    (``x.xlsx``, ``out.csv.gz``, a misspelt ``out.parqet``): it would quietly be a table of that name."""
    ending = FILE_ENDING.search(into)
    if ending and output_format(into) is None:
        raise InvalidParameter(
            f"sqlrp writes {', '.join(list(OUTPUTS)[:-1])} or {list(OUTPUTS)[-1]} files, not {ending.group(0)!r}; "
            f"{instead}"
        )


def looks_like_a_file(name: str) -> bool:
    """A path (a folder in it) or a name with a file ending (``emb.parqet``, ``x.xlsx``)."""
    return os.sep in name or bool(re.search(r"\.[A-Za-z][A-Za-z0-9]{1,7}$", name))


def similar_file(path: str) -> str | None:
    """A file beside ``path`` with a close name (``emb.parquet`` for ``emb.parqet``), as ``path``
    names its folder; ``None`` if there is none."""
    folder = Path(path).parent
    if not folder.is_dir():
        return None
    names = [f.name for f in folder.iterdir() if f.is_file()][:1000]
    close = difflib.get_close_matches(Path(path).name, names, n=1, cutoff=0.75)
    if not close:
        return None
    return str(folder / close[0]) if str(folder) != "." else close[0]


def no_such_file(path: str) -> str:
    """``no file 'emb.parqet' (did you mean 'emb.parquet'?)``: a missing file and the close name beside it."""
    near = similar_file(path)
    return f"no file {path!r}" + (f" (did you mean {near!r}?)" if near else "")


def is_remote(path: str) -> bool:
    """``s3://``, ``https://`` ...: DuckDB's extensions read them; sqlrp does not look for them first."""
    return "://" in path


def absolute(path: str) -> str:
    """``path`` as DuckDB should read it wherever it runs: absolute (remote URLs as given)."""
    return path if is_remote(path) else os.path.abspath(os.path.expanduser(path))


def matching(path: str) -> list[str]:
    """The local files ``path`` names: itself, or what its glob matches (sorted)."""
    full = absolute(path)
    if GLOB & set(full):
        return sorted(p for p in glob.glob(full, recursive=True) if os.path.isfile(p))
    return [full] if os.path.isfile(full) else []


def check_exists(path: str) -> list[str]:
    """The files ``path`` names; :class:`InputError` naming it if there are none."""
    if is_remote(path):
        return [path]
    found = matching(path)
    if not found:
        full = absolute(path)
        if GLOB & set(full):
            raise InputError(f"no file matches {path!r} (and no table has that name); check the pattern")
        what = "a folder, not a file" if os.path.isdir(full) else "not there"
        raise InputError(f"no table or file named {path!r}: the file {full!r} is {what}")
    return found


def sniff(path: str) -> str:
    """The format of a file whose name does not tell it: ``parquet`` (magic ``PAR1``), ``json``
    (first non-blank byte ``{`` or ``[``) or ``csv``."""
    fmt = file_format(path)
    if fmt is not None or is_remote(path):
        return fmt or "parquet"
    with open(check_exists(path)[0], "rb") as f:
        head = f.read(4096)
    if head.startswith(b"PAR1"):
        return "parquet"
    return "json" if head.lstrip()[:1] in (b"{", b"[") else "csv"


def reader(path: str, fmt: str, types: dict[str, str] | None = None, names: list[str] | None = None) -> exp.Expression:
    """``read_parquet('/abs/path')`` (or ``read_csv`` / ``read_json``): the path a quoted literal;
    ``types`` (CSV): ``types = {'column': 'DOUBLE', ...}``, names and types quoted literals too;
    ``names`` (CSV): the columns' names, in order, in place of the header's (DuckDB trims the spaces
    around a header's names: ``"p "`` is read as ``p``)."""
    args: list[exp.Expression] = [exp.Literal.string(absolute(path))]
    if names:
        listed = exp.Array(expressions=[exp.Literal.string(n) for n in names])
        args.append(exp.EQ(this=exp.var("names"), expression=listed))
    if types:
        pairs = [exp.PropertyEQ(this=exp.Literal.string(n), expression=exp.Literal.string(t)) for n, t in types.items()]
        args.append(exp.EQ(this=exp.var("types"), expression=exp.Struct(expressions=pairs)))
    return exp.Anonymous(this=READERS[fmt], expressions=args)


def read_input(db: object, path: str) -> str:
    """``--input PATH``: the file or glob ``path`` as a table of ``db`` named ``path`` (DuckDB only)."""
    if not hasattr(db, "read_file"):
        raise refuse_engine(getattr(db, "dialect", "this engine"), f"read the file {path!r}")
    return db.read_file(path)  # type: ignore[attr-defined]


def creatable(path: str) -> bool:
    """True if ``path`` names no file yet but could be made: its folder exists.  The embedded engines
    (DuckDB, SQLite) then make a database file at its first write, not when connecting (issue 31: a
    read of a mistyped path left an empty database behind); a missing folder still fails at once."""
    full = os.path.abspath(os.path.expanduser(path))
    return not os.path.exists(full) and os.path.isdir(os.path.dirname(full))


def existing_database(db: DB) -> DB:
    """``db``, unless it names a database file that was not there (``missing_file`` of the DuckDB and
    SQLite backends, :func:`creatable`): a call that only reads refuses it rather than make an empty
    file (the registry's tables would be created in it)."""
    missing = getattr(db, "missing_file", None)
    if missing:
        raise InputError(
            f"no database file {missing!r}: nothing to read (check the path; storing a projection, "
            "create_projection or `sqlrp create`, makes a new database)"
        )
    return db


def read_as_file(db: object, table: str) -> bool:
    """True if ``table`` is a file (or glob) ``db`` reads through a view of that name
    (:meth:`sqlrp.backends.duckdb.DuckDBBackend.read_file`): its column types were guessed from the
    file, not declared."""
    return table in getattr(db, "_files", {})


def definition_path(output: str | os.PathLike[str]) -> Path:
    """Where the projection that wrote ``output`` is kept: ``<output>.sqlrp.json``."""
    p = Path(output)
    return p.with_name(p.name + ".sqlrp.json")


def refuse_engine(dialect: str, what: str) -> InvalidParameter:
    """The error for a file where ``dialect`` cannot read or write one."""
    return InvalidParameter(
        f"{dialect} cannot {what}: files are read and written by DuckDB (omit --db for an in-memory "
        "DuckDB, or --db=duckdb:///file.db); or load the file into a table of this database first"
    )


def label(table: str) -> str:
    """A short name for default projection names: a file's stem (``data/emb.parquet`` -> ``emb``)."""
    if file_format(table) is None:
        return table
    stem = os.path.basename(table.rstrip("/"))
    for ending in (*_COMPRESSED, *_ENDINGS):
        if stem.lower().endswith(ending):
            stem = stem[: -len(ending)]
    return "".join(c if c.isalnum() or c == "_" else "_" for c in stem) or "file"


def writable_folder(out: str | Path) -> Path:
    """``out`` as a folder sqlrp can write into (made if missing), or :class:`InputError` saying why."""
    if "\x00" in str(out):
        raise InvalidParameter("the output folder's name contains a NUL byte")
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".sqlrp-write-test"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise InputError(
            f"cannot write the report into {str(out)!r}: {exc.strerror or exc}; name a folder you can write"
        ) from None
    return folder


def database_files(db: object) -> list[str]:
    """The database file itself, where the engine keeps one (DuckDB, SQLite, chdb)."""
    path = getattr(db, "path", None)
    if not isinstance(path, str) or not path or path.startswith(":") or "://" in path:
        return []
    return [path] if os.path.isfile(path) else []


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there: compare where they would be
        return os.path.realpath(a) == os.path.realpath(b)


def refuse_files(writes: Sequence[tuple[str | os.PathLike[str], str]], reads: Iterable[tuple[str, str]] = ()) -> None:
    """Refuse (one line) if a file in ``writes`` -- ``(path, what it is)`` pairs -- is (resolved:
    symlinks, hard links) one of ``reads``, pairs likewise."""
    reads = list(reads)
    for target, role in writes:
        for path, what in reads:
            if same_file(target, path):
                same = "" if os.path.abspath(target) == os.path.abspath(path) else f" (through {str(path)!r})"
                raise InvalidParameter(
                    f"cannot write {role} {str(target)!r}: it is {what}, which this operation reads{same} "
                    "(sqlrp never writes the source, nor anything it reads); choose another file"
                )


# ---- staging files: written beside the output, renamed into place; a dead writer's are swept ----

#: a staging file's name: ``.{output}.sqlrp-{pid}-{host}-{12 hex}{ending}`` -- the pid and host tag say
#: whose it is (files of an older sqlrp had no host tag: taken as this host's)
_STAGING = re.compile(r"^\.(?P<output>.+)\.sqlrp-(?P<pid>\d+)(?:-(?P<host>[0-9a-f]{6}))?-[0-9a-f]{12}(?P<ending>\..+)$")


def staging_path(target: Path, stamp: str, ending: str = ".tmp") -> Path:
    """The staging file of ``target`` for this process: hidden, beside it (one file system: the rename
    into place is atomic), named with this process's id and host tag so that the next writer can tell a
    dead process's file from a live one's, here or on another machine sharing the folder
    (:func:`sweep_staging`)."""
    return target.with_name(f".{target.name}.sqlrp-{os.getpid()}-{host_tag()}-{stamp}{ending}")


def staged_output(name: str) -> str:
    """The output a staging file's ``output`` part stages: itself, or -- the staging file of another staging
    file (a sidecar written under its staging name through its own, killed in between) -- what that one stages."""
    nested = _STAGING.match(name)
    return nested["output"] if nested is not None else name


def sweep_staging(target: Path, mine: bool = False) -> list[Path]:
    """Remove the staging files of ``target`` that processes of this host no longer running left (killed
    by the OOM killer, ``kill -9``, a power cut): on an SD card they would pile up, each as large as the
    output.  A live writer's file is left alone, and another host's; with ``mine``, this process's own
    go too (a cleanup an interrupt cut short).  Returns the files removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in target.parent.iterdir():
            found = _STAGING.match(entry.name)
            if not found or staged_output(found["output"]) != target.name or found["host"] not in (None, host_tag()):
                continue
            pid = int(found["pid"])
            if (mine and pid == os.getpid()) or (pid != os.getpid() and not alive(pid)):
                with contextlib.suppress(OSError):
                    entry.unlink()
                    removed.append(entry)
    return removed


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """A staging path beside ``target`` (:func:`staging_path`: named for this process) to write the whole
    file into; it replaces ``target`` when the block succeeds, and is removed when it fails.  What killed
    writers of ``target`` left is removed first (:func:`sweep_staging`): a file is never seen half-written,
    and a ``kill -9`` leaves nothing the next write does not take away."""
    sweep_staging(target)
    tmp = staging_path(target, uuid.uuid4().hex[:12])
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
