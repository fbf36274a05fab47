"""The registry's tables, defined once: each table, its columns, its key, and the registry version
that added each.  :mod:`sqlrp.registry.store` creates and upgrades them from this definition alone, rendered
for each engine through its dialect's hooks (``registry_type``, ``registry_constraints``,
``registry_create`` in ``sqlrp/dialects/base.py``: ClickHouse's ENGINE, Spark's tables without keys,
SQLite's WITHOUT ROWID ...).

``migrations/<dialect>/000N_<name>.sql`` is the same rendering written out for a DBA to read (and
``bootstrap.sql``, the version table).  ``python -m migrations`` (in the checkout) rewrites the
folders that exist, ``python -m migrations DIALECT ...`` writes those, ``--print DIALECT`` prints
one (:func:`main`); ``tests/io/test_registry_schema.py`` fails when a file differs from the rendering.  Column types are
sqlglot's type names (``TEXT``, ``JSON``, ``INT``, ``BIGINT``, ``SMALLINT``, ``DOUBLE``, ``BOOLEAN``,
``TIMESTAMP``); a dialect renders them as its own.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from ..dialects import SqlrpDialect, get_dialect

NOW = "now"  # a column default: the time of the insert


@dataclass(frozen=True)
class Column:
    """A column: its name, type (a sqlglot type name), whether it may be NULL, its default, and the
    registry version that added it (``None``: its table's)."""

    name: str
    type: str
    null: bool = False
    default: float | str | None = None  # a number, or NOW
    since: int | None = None


@dataclass(frozen=True)
class Table:
    """A registry table.  ``owned``: its rows belong to the projection named in its ``projection``
    column and are deleted with it."""

    name: str
    since: int
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    note: str = ""
    owned: bool = False


@dataclass(frozen=True)
class Version:
    """One registry version: the file it is recorded as (``000N_<name>.sql``) and what it adds."""

    number: int
    name: str
    note: str

    @property
    def file(self) -> str:
        return f"{self.number:04d}_{self.name}.sql"


VERSIONS = (
    Version(
        1,
        "registry",
        "a projection is stored as relational rows: its non-zero matrix entries (linear "
        "stage) and the terms of its combiner stage.",
    ),
    Version(
        2,
        "pairs_plan",
        "the `pairs` strategy's plan (sqlrp/compiler/pairs.py), stored with its projection so "
        "that it is planned once per matrix rather than once per process (planning a large matrix takes seconds).",
    ),
    Version(
        3,
        "search_index",
        "similarity-search indexes (sqlrp/search/index.py).  An index's rows live in tables named "
        "after it, in its source's schema; this row says how they were made.  Engines where search is refused "
        "keep the table empty.",
    ),
    Version(
        4,
        "index_params",
        "an index's structure (issue 23: inverted lists and RaBitQ codes in place of LSH "
        "bands) as JSON: kind, d, lists, code bits, rotation rounds and seed, metric, default probes.  An index "
        "of version 3 (bands) has none, and is refused with a note to rebuild it.",
    ),
    Version(
        5,
        "projection_digest",
        "a digest of each stored projection (SHA-256 of its canonical matrix, scale, combiner and parameters: "
        "sqlrp/registry/validate.py), written with it and compared on every load, so that a matrix changed "
        "outside sqlrp is refused.  The upgrade computes it for the projections already stored (in Python, "
        "after these statements).",
    ),
)

VERSION_TABLE = Table(
    "sqlrp_schema_version",
    since=0,
    key=("version",),
    note="the registry's version: one row per version applied (the runner reads max(version) before it adds one)",
    columns=(Column("version", "INT"), Column("name", "TEXT"), Column("applied_at", "TIMESTAMP", default=NOW)),
)

TABLES = (
    Table(
        "sqlrp_projection",
        since=1,
        key=("name",),
        note="one row per stored projection; params is JSON, seed NULL for none",
        columns=(
            Column("name", "TEXT"),
            Column("method", "TEXT"),
            Column("params", "JSON"),
            Column("d", "INT"),
            Column("k", "INT"),
            Column("p", "INT"),
            Column("seed", "BIGINT", null=True),
            Column("scale", "DOUBLE"),
            Column("created_at", "TIMESTAMP", default=NOW),
            Column("digest", "TEXT", null=True, since=5),
        ),
    ),
    Table(
        "sqlrp_linear_entry",
        since=1,
        owned=True,
        key=("projection", "vector", "feature"),
        note="linear stage: K_v(x) = sum_i weight * x_feature (+ bias_v); weights are +-1 for sign matrices",
        columns=(
            Column("projection", "TEXT"),
            Column("vector", "INT"),
            Column("feature", "INT"),
            Column("weight", "DOUBLE"),
        ),
    ),
    Table(
        "sqlrp_linear_vector",
        since=1,
        owned=True,
        key=("projection", "vector"),
        note="per-vector options of the linear stage, only where they differ from bias 0 / power 1",
        columns=(
            Column("projection", "TEXT"),
            Column("vector", "INT"),
            Column("bias", "DOUBLE", default=0),
            Column("power", "INT", default=1),
        ),
    ),
    Table(
        "sqlrp_combiner_term",
        since=1,
        owned=True,
        key=("projection", "term"),
        note="combiner stage: y_c = scale * sum_{terms of c} weight * prod_{factors} K_vector",
        columns=(
            Column("projection", "TEXT"),
            Column("term", "INT"),
            Column("component", "INT"),
            Column("weight", "DOUBLE"),
        ),
    ),
    Table(
        "sqlrp_combiner_factor",
        since=1,
        owned=True,
        key=("projection", "term", "position"),
        note="the factors K_vector of each combiner term, by position",
        columns=(
            Column("projection", "TEXT"),
            Column("term", "INT"),
            Column("position", "INT"),
            Column("vector", "INT"),
        ),
    ),
    Table(
        "sqlrp_pairs_entry",
        since=2,
        owned=True,
        key=("projection", "budget", "node", "reads"),
        note="one plan per column budget (-1: no cap).  Node q >= 0 is partial q, node -1 - v is output vector v; "
        "each row is one signed column it reads: feature c < d, or partial d + q.  `level` is the partial's "
        "nested select (0 for outputs)",
        columns=(
            Column("projection", "TEXT"),
            Column("budget", "INT"),
            Column("node", "INT"),
            Column("level", "INT"),
            Column("reads", "INT"),
            Column("sign", "SMALLINT"),
        ),
    ),
    Table(
        "sqlrp_index",
        since=3,
        key=("name",),
        note="how an index was made: the stored projection, the source table and its features (JSON), the "
        "band width, the feature means whose projections are the bits' thresholds (NULL: not centred), and "
        "(version 4) its structure as JSON",
        columns=(
            Column("name", "TEXT"),
            Column("projection", "TEXT"),
            Column("source", "TEXT"),
            Column("bits", "INT"),
            Column("band_bits", "INT"),
            Column("means", "TEXT", null=True),
            Column("vectors", "BOOLEAN"),
            Column("created_at", "TIMESTAMP", default=NOW),
            Column("params", "TEXT", null=True, since=4),
        ),
    ),
)

#: every table the registry owns: never an output (``project --into``) on any engine
REGISTRY_TABLES = frozenset({VERSION_TABLE.name, *(t.name for t in TABLES)})
#: the tables whose rows a stored projection owns (deleted with it)
OWNED_TABLES = tuple(t.name for t in TABLES if t.owned)
LATEST = VERSIONS[-1].number


def _name(name: str, dialect: SqlrpDialect) -> exp.Identifier:
    """``name`` as an identifier, quoted where the engine's parser reads it as a keyword (ClickHouse's
    ``projection``, PostgreSQL's ``name``; sqlglot's keyword list of the dialect)."""
    return exp.to_identifier(name, quoted=name.upper() in dialect.sqlglot.tokenizer_class.KEYWORDS)


def _column(column: Column, dialect: SqlrpDialect) -> exp.ColumnDef:
    constraints = []
    if not column.null and dialect.registry_constraints:
        constraints.append(exp.ColumnConstraint(kind=exp.NotNullColumnConstraint()))
    if column.default is not None:
        value = exp.CurrentTimestamp() if column.default == NOW else exp.Literal.number(column.default)
        constraints.append(exp.ColumnConstraint(kind=exp.DefaultColumnConstraint(this=value)))
    return exp.ColumnDef(
        this=_name(column.name, dialect),
        kind=dialect.registry_type(column.type, column.null),
        constraints=constraints or None,
    )


def create_table(table: Table, dialect: SqlrpDialect, version: int | None = None, exists: bool = False) -> str:
    """``CREATE TABLE`` of ``table`` as it stood at registry ``version`` (default: its own) for
    ``dialect``; ``exists``: ``IF NOT EXISTS``."""
    upto = table.since if version is None else version
    defs: list[exp.Expression] = [_column(c, dialect) for c in table.columns if (c.since or table.since) <= upto]
    if table.key and dialect.registry_constraints:
        defs.append(exp.PrimaryKey(expressions=[_name(k, dialect) for k in table.key]))
    create = exp.Create(kind="TABLE", this=exp.Schema(this=exp.to_table(table.name), expressions=defs), exists=exists)
    return dialect.registry_create(create, tuple(_name(k, dialect) for k in table.key))


def add_column(table: Table, column: Column, dialect: SqlrpDialect) -> str:
    """``ALTER TABLE ... ADD COLUMN`` of ``column`` to ``table`` for ``dialect``."""
    alter = exp.Alter(this=exp.to_table(table.name), kind="TABLE", actions=[_column(column, dialect)])
    return dialect.render(alter)


def _registry_dialect(dialect: str | SqlrpDialect) -> SqlrpDialect:
    """The dialect, if sqlrp keeps its registry there; else :class:`~sqlrp.core.errors.EngineLimit` saying
    what to do instead."""
    profile = get_dialect(dialect)
    if not profile.keeps_registry:
        raise profile.refuse(
            "sqlrp keeps no registry of stored projections on this engine (its tables are rendered only for "
            "engines sqlrp runs and tests).  Keep the projection where sqlrp runs (by default a local file) and "
            "bring its matrix here: export it (projections export, --to=NAME.parquet), load the file here as a "
            "table, then project or compile with --matrix=TABLE (or --matrix=values to inline the matrix)"
        )
    return profile


def statements(version: Version, dialect: str | SqlrpDialect, shape: int | None = None) -> list[str]:
    """The statements of registry ``version`` for ``dialect``, in order.  ``shape``: its tables are
    created as they stand at that later version, and no column is added (a new registry made at once)."""
    profile = _registry_dialect(dialect)
    out = [create_table(t, profile, version=shape) for t in TABLES if t.since == version.number]
    if shape is not None:
        return out
    for table in TABLES:
        if table.since < version.number:
            out += [add_column(table, c, profile) for c in table.columns if c.since == version.number]
    return out


def bootstrap(dialect: str | SqlrpDialect) -> str:
    """The statement that creates the version table if it is not there."""
    return create_table(VERSION_TABLE, _registry_dialect(dialect), exists=True)


def _comment(text: str, width: int = 100) -> list[str]:
    """``text`` as ``--`` comment lines of at most ``width`` characters."""
    lines, line = [], "--"
    for word in text.split():
        if len(line) + 1 + len(word) > width and line != "--":
            lines.append(line)
            line = "--"
        line += " " + word
    return [*lines, line]


def render_file(version: Version | None, dialect: str | SqlrpDialect) -> str:
    """The text of ``migrations/<dialect>/<version.file>`` (``bootstrap.sql`` for ``None``): a header
    saying what the version adds, then each statement after its table's note."""
    profile = _registry_dialect(dialect)
    origin = f"Rendered for {profile.name} from sqlrp/registry/schema.py by `python -m migrations`: do not edit."
    if version is None:
        parts = [
            *_comment(f"sqlrp registry: the version table ({profile.name}), {VERSION_TABLE.note}."),
            *_comment(origin),
            bootstrap(profile) + ";",
        ]
        return "\n".join(parts) + "\n"
    parts = [*_comment(f"sqlrp registry, version {version.number} ({profile.name}): {version.note}"), *_comment(origin)]
    for table in TABLES:
        if table.since == version.number:
            parts += ["", *_comment(f"{table.name}: {table.note}."), create_table(table, profile) + ";"]
        elif table.since < version.number:
            for column in table.columns:
                if column.since == version.number:
                    parts += ["", add_column(table, column, profile) + ";"]
    return "\n".join(parts) + "\n"


def migration_files(dialect: str | SqlrpDialect) -> list[tuple[int, str, str]]:
    """``(version, file name, SQL)`` of every registry version for ``dialect``, in order, rendered
    from the definition (the same text as ``migrations/<dialect>/``)."""
    return [(v.number, v.file, render_file(v, dialect)) for v in VERSIONS]


def migrations_folder() -> Path:
    """``migrations/`` of the source checkout (the rendered record)."""
    return Path(__file__).resolve().parents[2] / "migrations"


def write(dialect: str, folder: Path | None = None) -> list[Path]:
    """Write ``migrations/<dialect>/`` (bootstrap.sql and one file per version); returns the paths."""
    target = (folder or migrations_folder()) / dialect
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for version in (None, *VERSIONS):
        path = target / (version.file if version else "bootstrap.sql")
        path.write_text(render_file(version, dialect))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m migrations [--print] [DIALECT ...]`` (module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--print"]:
        for dialect in args[1:]:
            print(render_file(None, dialect))
            for version in VERSIONS:
                print(render_file(version, dialect))
        return 0
    dialects = args or sorted(
        p.name for p in migrations_folder().iterdir() if p.is_dir() and not p.name.startswith("_")
    )
    for dialect in dialects:
        for path in write(dialect):
            print(path)
    return 0


__all__ = [
    "LATEST",
    "NOW",
    "OWNED_TABLES",
    "REGISTRY_TABLES",
    "TABLES",
    "VERSIONS",
    "VERSION_TABLE",
    "Column",
    "Table",
    "Version",
    "bootstrap",
    "migration_files",
    "render_file",
    "statements",
]
