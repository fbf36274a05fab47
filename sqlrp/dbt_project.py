"""A dbt project as :func:`sqlrp.dbt_model` reads it: where its models, seeds and tests go, and which SQL
dialect its profile's adapter speaks.

dbt finds a project's connection in ``profiles.yml`` (`dbt's docs, "About profiles.yml"
<https://docs.getdbt.com/docs/core/connect-data-platform/profiles.yml>`_): the profile named by
``dbt_project.yml``'s ``profile:``, its ``target:`` (or the one asked for), and that output's ``type:``,
the adapter (``duckdb``, ``postgres``, ...).  The file is looked for as dbt looks for it: the folder
given (``--profiles-dir``), ``$DBT_PROFILES_DIR``, the project's folder, ``~/.dbt``.  Each adapter sqlrp
renders for maps to one sqlrp dialect (:data:`ADAPTERS`); any other is refused in one line.

Files are written as every sqlrp output is: each staged beside its place, then renamed into it
(:func:`write_files`); an existing file is replaced only when asked (``replace``).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .core.errors import InputError, InvalidParameter, ProjectionExists, need
from .core.files import staging_path

#: each dbt adapter sqlrp renders for (its profile's ``type:``) and the sqlrp dialect it speaks; the
#: adapters of dbt-duckdb and dbt-postgres are run by the tests (tests/io/test_dbt.py), the others are
#: rendered as ``sqlrp compile --dialect`` renders them (run ``dbt test`` there: the self-check says
#: whether the SQL is exact on that warehouse)
ADAPTERS = {
    "duckdb": "duckdb",
    "postgres": "postgres",
    "snowflake": "snowflake",
    "bigquery": "bigquery",
    "spark": "spark",
    "databricks": "spark",
    "trino": "trino",
    "clickhouse": "clickhouse",
    "sqlite": "sqlite",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlserver": "tsql",
    "fabric": "tsql",
}

#: a dbt resource name: what ``ref()`` finds and a file name can hold
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class DbtProject:
    """A dbt project: its folder, the profile and target its connection is, the adapter there and the
    sqlrp dialect that adapter speaks, and the folders of its models, seeds and singular tests."""

    root: Path
    profile: str
    target: str
    adapter: str
    dialect: str
    models: Path
    seeds: Path
    tests: Path


def _yaml(path: Path) -> dict:
    """The YAML mapping in ``path`` (:class:`InputError` in one line if it is none)."""
    yaml = need("yaml", "dbt", "reading a dbt project")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read {str(path)!r}: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise InputError(f"{str(path)!r} holds no YAML mapping")
    return data


def profiles_file(root: Path, profiles_dir: str | os.PathLike[str] | None = None) -> Path:
    """The ``profiles.yml`` dbt reads for the project in ``root`` (module docstring: where it is looked for)."""
    given = profiles_dir or os.environ.get("DBT_PROFILES_DIR")
    folders = [Path(given)] if given else [root, Path.home() / ".dbt"]
    for folder in folders:
        if (folder / "profiles.yml").is_file():
            return folder / "profiles.yml"
    where = " or ".join(repr(str(f)) for f in folders)
    raise InputError(
        f"no profiles.yml in {where}: the dbt project's connection is there (give --profiles-dir, or set "
        "DBT_PROFILES_DIR)"
    )


def read_project(
    project_dir: str | os.PathLike[str], profiles_dir: str | os.PathLike[str] | None = None, target: str | None = None
) -> DbtProject:
    """The dbt project in ``project_dir`` (its ``dbt_project.yml``) with the adapter of its profile's
    ``target`` (default: the profile's own ``target:``).  :class:`InputError` for a missing file or entry,
    :class:`InvalidParameter` for an adapter sqlrp does not render for."""
    root = Path(project_dir)
    if not (root / "dbt_project.yml").is_file():
        raise InputError(f"no dbt_project.yml in {str(root)!r}: give the dbt project's folder (dbt init makes one)")
    project = _yaml(root / "dbt_project.yml")
    profile = project.get("profile")
    if not isinstance(profile, str) or not profile:
        raise InputError(f"{str(root / 'dbt_project.yml')!r} names no profile (profile: NAME)")
    path = profiles_file(root, profiles_dir)
    entry = _yaml(path).get(profile)
    if not isinstance(entry, dict) or not isinstance(entry.get("outputs"), dict):
        raise InputError(f"{str(path)!r} has no profile {profile!r} with outputs (the dbt project's profile)")
    chosen = target or entry.get("target") or "dev"
    output = entry["outputs"].get(chosen)
    if not isinstance(output, dict):
        raise InputError(f"profile {profile!r} in {str(path)!r} has no target {chosen!r}")
    adapter = str(output.get("type", "")).strip()
    if adapter.lower() not in ADAPTERS:
        raise InvalidParameter(
            f"dbt adapter {adapter!r} (profile {profile!r}, target {chosen!r}) has no sqlrp rendering; sqlrp renders "
            f"for the adapters {', '.join(sorted(ADAPTERS))}"
        )

    def folder(key: str, default: str) -> Path:
        paths = project.get(key) or [default]
        return root / (paths[0] if isinstance(paths, list) and paths else default)

    return DbtProject(
        root=root,
        profile=profile,
        target=str(chosen),
        adapter=adapter.lower(),
        dialect=ADAPTERS[adapter.lower()],
        models=folder("model-paths", "models"),
        seeds=folder("seed-paths", "seeds"),
        tests=folder("test-paths", "tests"),
    )


def check_name(name: str, what: str) -> str:
    """``name`` if it is a dbt resource name (letters, digits, ``_``; not a digit first), else refused."""
    if not isinstance(name, str) or not NAME.match(name):
        raise InvalidParameter(f"{what} must be a dbt name (letters, digits and _, not a digit first), got {name!r}")
    return name


def refuse_existing(project: DbtProject, files: Iterable[Path], model: str, replace: bool) -> None:
    """Refuse, before anything is written, to overwrite a file without ``replace``, or to write a model
    whose name another model file of the project already has (dbt refuses two models of one name)."""
    if not replace:
        there = [str(p.relative_to(project.root)) for p in files if p.exists()]
        if there:
            raise ProjectionExists(
                f"the dbt project already has {', '.join(there)}: pass --replace to overwrite, or choose another --into"
            )
    mine = project.models / f"{model}.sql"
    if project.models.is_dir():
        for other in project.models.rglob(f"{model}.sql"):
            if other.resolve() != mine.resolve():
                raise ProjectionExists(
                    f"the dbt project has a model {model!r} already ({str(other.relative_to(project.root))}): "
                    "choose another --into"
                )


def write_files(files: dict[Path, str]) -> list[Path]:
    """Write every file: all staged first (hidden, beside its place), then each renamed into place, so a
    failure while writing leaves no file half-written and none of them changed."""
    stamp = secrets.token_hex(6)
    staged: list[tuple[Path, Path]] = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = staging_path(path, stamp)
            with open(tmp, "w", encoding="utf-8", newline="\n") as out:
                out.write(text)
            staged.append((tmp, path))
    except OSError as exc:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write into the dbt project: {exc.strerror or exc} ({exc.filename})") from None
    for tmp, path in staged:
        os.replace(tmp, path)
    return [path for _, path in staged]


__all__ = ["ADAPTERS", "DbtProject", "check_name", "read_project", "refuse_existing", "write_files"]
