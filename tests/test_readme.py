"""The README's Python example runs as written, top to bottom, twice in the same folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def python_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("\n## Python\n") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_python_example_runs_twice(tmp_path):
    code = python_example()
    assert "sqlrp.connect(" in code and "sqlrp.project(" in code
    for run in range(2):  # the second run meets everything the first one stored
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 0, f"run {run + 1}:\n{done.stderr[-3000:]}"
    assert (tmp_path / "warehouse.db").exists() and (tmp_path / "report" / "metrics.json").exists()
