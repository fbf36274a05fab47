"""The README's Python example, and the whole-API tour of the docs' Python page, run as written, top to
bottom, twice in the same folder (the second run meets everything the first one stored)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import sqlrp

ROOT = Path(__file__).resolve().parents[2]


def python_block(path: Path, heading: str) -> str:
    """The first ```python block after ``heading`` (a line of its own) in the Markdown file ``path``."""
    text = path.read_text()
    section = text[text.index(f"\n{heading}\n") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def python_example() -> str:
    return python_block(ROOT / "README.md", "## Python")


def run_twice(code: str, folder: Path) -> list[str]:
    """Run ``code`` twice in ``folder``; what each run printed."""
    printed = []
    for run in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 0, f"run {run + 1}:\n{done.stderr[-3000:]}"
        printed.append(done.stdout)
    return printed


def test_readme_python_example_runs_twice(tmp_path):
    code = python_example()
    assert "sqlrp.connect(" in code and "sqlrp.project(" in code
    printed = run_twice(code, tmp_path)
    for out in printed:  # the compiled SQL for Spark, then the first hits
        assert "SELECT" in out and "query_id" in out
    db = sqlrp.connect(f"duckdb:///{tmp_path / 'warehouse.db'}")
    try:
        assert db.fetchall("SELECT count(*) FROM digits_k2") == [(1797,)]
        assert [c.name for c in db.columns("digits_k2")] == ["id", *(f"p{i}" for i in range(160))]
        stored = sqlrp.list_projections(db)
        assert dict(zip(stored["name"], stored["k"], strict=True)) == {"rp40": 40, "prp": 160}  # reused, not re-stored
        assert sqlrp.list_indexes(db)["name"].tolist() == ["digits_idx"]
    finally:
        db.close()


def test_docs_python_tour_runs_twice(tmp_path):
    code = python_block(ROOT / "docs" / "guide" / "python.md", "## The tour")
    for call in ("sqlrp.tune(", "sqlrp.evaluate(", "sqlrp.build_index(", "sqlrp.search(", "SQLRandomProjection"):
        assert call in code
    run_twice(code, tmp_path)
    assert (tmp_path / "warehouse.db").exists() and (tmp_path / "report" / "metrics.json").exists()
