"""MkDocs hook: the pages that are read off the code at build time, so that they cannot drift from it.

- ``reference/cli.md``: ``sqlrp --help`` and ``sqlrp <command> --help`` of every command that
  ``sqlrp --help`` lists, as the installed CLI prints them (``sqlrp.cli.main``, 96 columns).
- ``reference/api.md`` (written by hand): each ``::: sqlrp.NAME`` pointed at where the name is defined,
  and every name of ``sqlrp.__all__`` the page does not list added at its end (:func:`on_page_markdown`).
- ``reference/engines.md``: how each registered backend is reached (``sqlrp.backends.engines_table()``),
  and every engine profile (``sqlrp.dialects.dialect_names()``, as ``get_dialect(name)`` returns it):
  its features and limits, with the meaning of each attribute taken from the comments of
  ``sqlrp/dialects/base.py``.
- ``reference/methods.md``: every ``--method`` of ``sqlrp.methods.METHODS``, its generator's docstring.
- ``reference/registry.md``: the registry's tables and versions, from ``sqlrp/registry/schema.py``.
- ``reference/modules.md``: every module of the ``sqlrp`` package with the first paragraph of its
  docstring, read with :mod:`ast` (nothing imported).

Registered in ``mkdocs.yml`` under ``hooks:``; MkDocs calls :func:`on_files` before it builds the nav.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import os
import re
import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

WIDTH = "96"  # columns argparse wraps --help at
ROOT = Path(__file__).resolve().parents[2]
for _path in (ROOT, Path(__file__).resolve().parent):  # the working tree's sqlrp, as mkdocstrings reads it
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from rst_roles import plain  # noqa: E402 - found through the path above


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages to the site's files (before the nav is read, so it may name them)."""
    for path, text in (
        ("reference/cli.md", cli_page()),
        ("reference/engines.md", engines_page()),
        ("reference/methods.md", methods_page()),
        ("reference/registry.md", registry_page()),
        ("reference/modules.md", modules_page()),
    ):
        files.append(File.generated(config, path, content=text))
    return files


def on_page_markdown(markdown: str, page: object, config: MkDocsConfig, files: Files) -> str:
    """The API reference: each ``::: sqlrp.NAME`` points at the object ``sqlrp.NAME`` is at run time
    (where it is defined: ``sqlrp.search`` is the function of that name, not the module), and every name
    of ``sqlrp.__all__`` that no section lists is added at the end."""
    if page.file.src_uri != "reference/api.md":
        return markdown
    import sqlrp

    listed = {name.rsplit(".", 1)[-1] for name in re.findall(r"^::: ([\w.]+)", markdown, re.M)}
    missing = [name for name in sqlrp.__all__ if name not in listed]
    if missing:
        markdown += "\n\n## Other names\n\n" + "\n\n".join(f"::: sqlrp.{name}" for name in missing) + "\n"
    return re.sub(r"^::: sqlrp\.(\w+)$", lambda m: f"::: {defined_at(m.group(1))}", markdown, flags=re.M)


def defined_at(name: str) -> str:
    """Where ``sqlrp.<name>`` is defined, as a dotted path (``sqlrp.search.index.search``)."""
    import sqlrp

    obj = getattr(sqlrp, name)
    return f"{obj.__module__}.{obj.__qualname__}"


# ---------------------------------------------------------------- the CLI reference


def help_text(*argv: str) -> str:
    """What ``sqlrp *argv --help`` prints, from the CLI's own entry point."""
    from sqlrp.cli import main

    saved = {key: os.environ.get(key) for key in ("COLUMNS", "NO_COLOR")}
    os.environ.update(COLUMNS=WIDTH, NO_COLOR="1")
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main([*argv, "--help"])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    text = out.getvalue().rstrip()
    if not text.startswith("usage:"):
        raise RuntimeError(f"sqlrp {' '.join(argv)} --help printed no usage:\n{text}")
    return text


def commands(top: str) -> list[str]:
    """The commands ``sqlrp --help`` lists, in its order (argparse's ``{a,b,c}``)."""
    found = re.search(r"\{([a-z0-9_,-]+)\}", top)
    if not found:
        raise RuntimeError(f"no commands in sqlrp --help:\n{top}")
    return found.group(1).split(",")


def cli_page() -> str:
    top = help_text()
    lines = [
        "# CLI reference",
        "",
        "Generated when the site is built, from `sqlrp --help` and `sqlrp COMMAND --help` of the installed",
        "CLI: what is here is what the command takes. The [command-line guide](../guide/cli.md) shows them in use.",
        "",
        "## sqlrp",
        "",
        "```text",
        top,
        "```",
        "",
    ]
    for name in commands(top):
        lines += [f"## sqlrp {name}", "", "```text", help_text(name), "```", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- the engines table


def profiles() -> list[object]:
    """Every dialect with a profile of its own, as ``get_dialect`` returns it (the engines sqlrp runs
    first, DuckDB first among them), and the generic profile of a sqlglot dialect sqlrp has none of."""
    from sqlrp.dialects import dialect_names, get_dialect

    found = [get_dialect(name) for name in dialect_names()]
    ordered = sorted(found, key=lambda p: (not p.executes, p.name != "duckdb", p.name))
    return [*ordered, get_dialect("oracle")]


def attribute_notes() -> dict[str, str]:
    """``attribute -> meaning``: the comments above and beside each attribute of the base profile."""
    from sqlrp.dialects.base import SqlrpDialect

    notes: dict[str, str] = {}
    above: list[str] = []
    for line in inspect.getsource(SqlrpDialect).splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("# ----"):
            above = []
        elif stripped.startswith("#"):
            above.append(stripped.lstrip("# "))
        elif match := re.match(r"^    (\w+)\s*(?::[^=]*)?=\s*[^#]*?(?:#\s*(.*))?$", line):
            text = " ".join([*above, match.group(2) or ""]).strip()
            if text:
                notes[match.group(1)] = text
            above = []
        else:
            above = []
    return notes


def _searchable(profile: object) -> bool:
    """True if the engine has the bit count and row hash that similarity search needs."""
    from sqlglot import exp

    from sqlrp.core.errors import SqlrpError

    try:
        profile.popcount(exp.column("w"))
        profile.row_hash([exp.column("a")])
    except SqlrpError:
        return False
    return True


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, int):
        return f"{value:,}"
    return f"`{value}`"


FEATURES = [
    "executes",
    "arrays",
    "array_base",
    "float32",
    "transactional",
    "filter_clause",
    "ordered_array_agg",
    "values_column_names",
    "nested_plans",
    "wide_as_long",
    "list_lambdas",
    "select_unnest",
    "exponent_literals",
    "values_relation",
    "code_word_bits",
    "identifier_case",
    "quoted_case_fold",
]
LIMITS = [
    "max_columns",
    "max_statement_bytes",
    "max_ast_nodes",
    "max_expression_depth",
    "max_plan_optimizations",
    "max_identifier_bytes",
    "split_statement_bytes",
    "table_name_pattern",
]


def _label(profile: object) -> str:
    return f"`{profile.name}`" if profile.name != "oracle" else "other"


def _table(rows: list[object], attributes: dict[str, object]) -> list[str]:
    """One row per attribute, one column per engine (``attributes``: name -> value of a profile)."""
    lines = ["| | " + " | ".join(_label(p) for p in rows) + " |", "|---|" + "---|" * len(rows)]
    for attribute, value in attributes.items():
        lines.append(f"| [`{attribute}`](#{attribute}) | " + " | ".join(_cell(value(p)) for p in rows) + " |")
    return lines


def _getter(attribute: str) -> object:
    return lambda profile: getattr(profile, attribute)


def connections_table() -> list[str]:
    """The backends' registrations as a Markdown table."""
    from sqlrp.backends import engines_table

    columns = {
        "engine": "engine",
        "dialect": "dialect",
        "url": "example",
        "schemes": "URL schemes",
        "files": "file endings",
        "connections": "connection classes",
        "install": "install",
    }
    lines = ["| " + " | ".join(columns.values()) + " |", "|" + "---|" * len(columns)]
    for row in engines_table():
        cells = []
        for key in columns:
            value = row.get(key, "")
            plain_text = key == "engine" or not value or value.startswith("(") or value == "any other URL"
            cells.append(value if plain_text else f"`{value}`")
        lines.append("| " + " | ".join(_table_cell(c) or "-" for c in cells) + " |")
    return lines


def engines_page() -> str:
    rows = profiles()
    notes = attribute_notes()
    notes["search"] = (
        "the engine has the bit count and the row hash that a [similarity search](../guide/search.md) needs "
        "(`popcount` and `row_hash` of its profile)"
    )
    lines = [
        "# Engines table",
        "",
        "Generated when the site is built from each engine's profile: every dialect class of",
        "`sqlrp/dialects/*.py` (`sqlrp.dialects.dialect_names()`), as `sqlrp.dialects.get_dialect(name)`",
        "returns it. A profile is what the compiler asks before it",
        "emits SQL (see [Engines](../guide/engines.md)); `-` means no limit that sqlrp knows of. The column",
        "`other` is what `sqlrp compile --dialect X` uses for a sqlglot dialect sqlrp has no profile of",
        "(here `oracle`): the portable constructs only.",
        "",
    ]
    lines += [
        "## Connecting",
        "",
        "From the backends' registrations (`sqlrp.backends.engines_table()`): what `sqlrp.connect(...)` and",
        "`--db` take for each engine, in the order `connect` tries them. A connection object is recognised",
        "by the module of its class; a bare path by its file ending.",
        "",
        *connections_table(),
        "",
    ]
    runs = [p for p in rows if p.executes]
    renders = [p for p in rows if not p.executes]
    features = {"search": _searchable, **{a: _getter(a) for a in FEATURES}}
    limits = {a: _getter(a) for a in LIMITS}
    lines += [
        "## Engines sqlrp runs",
        "",
        "Each has a backend, and its tests compare every result with the NumPy reference.",
        "",
        "### Features",
        "",
        *_table(runs, features),
        "",
        "### Limits",
        "",
        *_table(runs, limits),
        "",
        "## Engines sqlrp renders for",
        "",
        "SQL for these is rendered (`sqlrp compile --dialect NAME`) and run through SQLAlchemy with the",
        "engine's own driver; their profiles come from the engines' documentation.",
        "",
        "### Features",
        "",
        *_table(renders, features),
        "",
        "### Limits",
        "",
        *_table(renders, limits),
        "",
        "## What each attribute means",
        "",
        "From the comments of `sqlrp/dialects/base.py`, where each default is set; each dialect file gives",
        "the source (the engine's documentation, or a measurement) of the values it changes.",
        "",
    ]
    for attribute in ["search", *FEATURES, *LIMITS]:
        lines += [f"### `{attribute}` {{#{attribute}}}", "", notes.get(attribute, "(no comment in base.py)"), ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- the methods


def _signature(function: object) -> str:
    """``(d: int, k: int, ...) -> Projection``: annotations read as types, not the strings that
    ``from __future__ import annotations`` leaves."""
    try:
        return str(inspect.signature(function, eval_str=True))  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a name only a type checker sees: the strings, as written
        return str(inspect.signature(function))  # type: ignore[arg-type]


def methods_page() -> str:
    """Every ``--method`` of ``sqlrp.methods.METHODS``, its generator's docstring."""
    from sqlrp.methods import METHODS

    lines = [
        "# Methods reference",
        "",
        "Generated when the site is built: every name `--method` (and `method=`) takes, from",
        "`sqlrp.methods.METHODS`, with the docstring of the function that draws its matrix. The",
        "[methods guide](../guide/methods.md) says which to use; DT-RP is",
        f"[`sqlrp.tune`](api.md#{defined_at('tune')}).",
        "",
    ]
    for name, function in METHODS.items():
        lines += [
            f"## `{name}`",
            "",
            "```python",
            f"{function.__module__}.{function.__qualname__}{_signature(function)}",
            "```",
            "",
            f"::: {function.__module__}.{function.__qualname__}",
            "    options:",
            "      heading_level: 3",
            "      show_root_heading: false",  # the method's own heading above names it once
            "      separate_signature: true",
            "",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------- the registry's tables


def registry_page() -> str:
    """The registry's tables and versions from their one definition, ``sqlrp/registry/schema.py``."""
    from sqlrp.registry import schema

    lines = [
        "# Registry tables",
        "",
        "Generated when the site is built from the registry's one definition, `sqlrp/registry/schema.py`:",
        "every table, its columns, its key, and the registry version that added each. Each engine renders",
        "it through its dialect's hooks (`registry_type`, `registry_constraints`, `registry_create`); the",
        "files of `migrations/<engine>/` are that rendering written out for a DBA to read",
        "(`python -m migrations`), and a test fails when one differs. [The registry](../guide/registry.md)",
        "says how sqlrp uses them.",
        "",
        "## Versions",
        "",
        "| version | file | what it adds |",
        "|---|---|---|",
    ]
    for version in schema.VERSIONS:
        lines.append(f"| {version.number} | `{version.file}` | {_table_cell(version.note)} |")
    lines.append("")
    for table in (schema.VERSION_TABLE, *schema.TABLES):
        since = "the bootstrap" if table.since == 0 else f"version {table.since}"
        key = ", ".join(f"`{k}`" for k in table.key) or "none"
        owned = "; its rows are deleted with their projection" if table.owned else ""
        lines += [
            f"## `{table.name}`",
            "",
            f"{table.note[:1].upper()}{table.note[1:]}. Since {since}; key {key}{owned}.",
            "",
            "| column | type | NULL | default | since |",
            "|---|---|---|---|---|",
        ]
        for column in table.columns:
            default = "-" if column.default is None else f"`{column.default}`"
            added = column.since or table.since or "bootstrap"
            lines.append(
                f"| `{column.name}` | `{column.type}` | {'yes' if column.null else 'no'} | {default} | {added} |"
            )
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- the code's layout


def _first_paragraph(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = plain(" ".join(doc.strip().split("\n\n")[0].split()))
    return re.sub(r"``([^`]+)``", r"`\1`", text)  # one backtick a side: what a table cell's code span needs


def _table_cell(text: str) -> str:
    """``text`` for a Markdown table cell: pipes outside code spans escaped (inside, the table keeps them)."""
    parts = text.split("`")
    return "`".join(part.replace("|", "\\|") if i % 2 == 0 else part for i, part in enumerate(parts))


def modules_page() -> str:
    root = ROOT / "sqlrp"
    lines = [
        "# Modules",
        "",
        "Generated when the site is built: every module of the `sqlrp` package, folder by folder, with the",
        "first paragraph of its docstring. The [API reference](api.md) documents the public functions.",
        "",
    ]
    folders = sorted({p.parent for p in root.rglob("*.py") if "__pycache__" not in p.parts})
    for folder in folders:
        relative = folder.relative_to(ROOT).as_posix()
        lines += [f"## `{relative}/`", ""]
        init = folder / "__init__.py"
        if folder != root and init.exists() and _first_paragraph(init):
            lines += [_first_paragraph(init), ""]
        lines += ["| module | what it holds |", "|---|---|"]
        for path in sorted(folder.glob("*.py"), key=lambda p: (p.name != "__init__.py", p.name)):
            if folder != root and path.name == "__init__.py":
                continue
            lines.append(f"| `{path.name}` | {_table_cell(_first_paragraph(path)) or '-'} |")
        lines.append("")
    lines += [
        "## Beside the package",
        "",
        "| folder | what it holds |",
        "|---|---|",
        "| `migrations/` | the registry's versioned DDL per dialect, installed as `sqlrp.migrations` |",
        "| `bench/` | the benchmarks ([Benchmarks](../benchmarks.md); `bench/README.md` lists every command) |",
        "| `examples/` | quickstart, Table 1 of paper 000 (kernels), DT-RP against RP (`examples/README.md`) |",
        "| `tests/` | the tests, one folder per concern: engines, projection, search, io, interface, reliability, "
        "fuzz ([Tests](../tests.md)) |",
        "| `testkit/` | the helpers the tests and the benchmarks share (PostgreSQL and Spark servers, frames, the "
        "cross-engine matrix, the fuzzer's parts); used from a checkout, not installed |",
        "| `docs/` | this site; `docs/hooks/` generates its reference pages |",
        "",
    ]
    return "\n".join(lines)
