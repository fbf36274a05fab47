"""The documentation site builds strictly (every link and anchor resolves, every generated page is made),
its generated pages cover what the code has, and every command it shows exists with those options."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import sqlrp

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
OTHER_TOOLS = {"--site-dir": "mkdocs build", "--bindir": "pg_config"}  # options the docs name of other tools


def sqlrp_help(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "sqlrp", *argv, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@cache
def commands() -> tuple[str, ...]:
    """The commands `sqlrp --help` lists."""
    return tuple(re.search(r"\{([a-z0-9_,-]+)\}", sqlrp_help()).group(1).split(","))


def page_text(site: Path, page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", (site / page / "index.html").read_text()))


def test_the_site_builds_strictly(site):
    for page in ("index.html", "guide/python/index.html", "benchmarks/index.html", "add-an-engine/index.html"):
        assert (site / page).exists(), page


def test_the_cli_reference_has_every_command(site):
    text = page_text(site, "reference/cli")
    assert len(commands()) >= 10
    for command in commands():
        assert f"usage: sqlrp {command}" in text, command
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", sqlrp_help(command)):
            assert option in text, (command, option)


def test_the_engines_table_has_every_engine(site):
    text = page_text(site, "reference/engines")
    for name in ("duckdb", "postgres", "sqlite", "clickhouse", "spark", "snowflake", "bigquery", "trino"):
        assert name in text, name
    for attribute in ("arrays", "float32", "max_columns", "max_statement_bytes", "transactional", "executes"):
        assert attribute in text, attribute
    # every backend sqlrp registers, with the URL it is reached by -- read in a fresh interpreter, since
    # tests may register throw-away engines in this one (tests/engines/test_engine_registration.py)
    listed = subprocess.run(
        [sys.executable, "-c", "import json, sqlrp.backends as b; print(json.dumps(b.engines_table()))"],
        capture_output=True,
        text=True,
        check=True,
    )
    for row in json.loads(listed.stdout):
        assert row["engine"] in text and row["url"] in text, row


def test_the_api_reference_has_every_public_name(site):
    """Each name documented where it is defined (``sqlrp.search`` is a function there, not the module)."""
    page = (site / "reference" / "api" / "index.html").read_text()
    for name in sqlrp.__all__:
        obj = getattr(sqlrp, name)
        assert f'id="{obj.__module__}.{obj.__qualname__}"' in page, name


def shown_commands() -> list[tuple[str, str]]:
    """Every `sqlrp COMMAND ...` the README and the docs show: lines of their code blocks and inline
    code, continuation lines joined, comments dropped; (page, command line)."""
    found = []
    for path in PAGES:
        text = path.read_text()
        lines = []
        for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", text, re.S):
            lines += block.replace("\\\n", " ").splitlines()
        lines += re.findall(r"(?<!`)`(sqlrp [^`]+)`", text)
        for line in lines:
            line = line.split(" #", 1)[0].strip()
            if line.startswith("sqlrp ") or " && sqlrp " in line:
                found.append((path.relative_to(ROOT).as_posix(), line[line.index("sqlrp ") :]))
    return found


def test_every_command_shown_exists_with_its_options():
    shown = shown_commands()
    assert len(shown) > 30
    helps = {command: sqlrp_help(command) for command in commands()}
    for page, line in shown:
        words = line.replace("[", " ").replace("]", " ").split()
        if words[1].startswith("-"):  # sqlrp --version
            assert words[1] in sqlrp_help(), (page, line)
            continue
        assert words[1] in helps, f"{page}: {line!r}: no command {words[1]!r}"
        for word in words[2:]:
            option = word.split("=", 1)[0]
            if option.startswith("--"):
                assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", helps[words[1]]), (
                    f"{page}: {line!r}: `sqlrp {words[1]}` has no option {option}"
                )


def test_every_option_named_exists():
    """An `--option` named anywhere in the README or the docs is an option of some `sqlrp` command, or of
    the benchmark or example script it is shown with."""
    known = "\n".join([sqlrp_help(), *(sqlrp_help(c) for c in commands())])
    scripts = "\n".join(p.read_text() for folder in ("bench", "examples") for p in (ROOT / folder).glob("*.py"))
    for path in PAGES:
        for option in set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", path.read_text())):
            pattern = rf"(?<![\w-]){re.escape(option)}(?![\w-])"
            in_scripts = re.search(rf"""["']{re.escape(option)}["']""", scripts)
            found = re.search(pattern, known) or in_scripts or option in OTHER_TOOLS
            assert found, f"{path.relative_to(ROOT)}: no command takes {option}"


def test_every_path_named_exists():
    """A file or folder of the repository named in the README or the docs is there (a module that moved
    is named where it now is); the placeholders of "Add an engine" and the (gitignored) results of a
    benchmark run aside."""
    roots = "sqlrp|bench|tests|testkit|examples|migrations|sql|docs"
    pattern = re.compile(rf"(?<![\w/.])((?:{roots})/[\w./-]*\w/?)(?![<*\w])")
    for path in PAGES:
        for name in set(pattern.findall(path.read_text())):
            if "myengine" in name or name.startswith("bench/results/"):
                continue
            assert (ROOT / name).exists(), f"{path.relative_to(ROOT)} names {name}, which is not in the repository"
