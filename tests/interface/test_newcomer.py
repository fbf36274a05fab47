"""What a newcomer hits (issue 35, items 5 and 7), tried as a newcomer would: the home page quotes what
`sqlrp demo` prints, code lines are not clipped and no heading is doubled on the site, numeric ids come
back in numeric order, ``transform_frame`` and ``project`` agree row for row, the command line explores
a table without storing anything, and the transformer's ``n_components="auto"`` is scikit-learn's."""

from __future__ import annotations

import collections
import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.demo import run_demo
from sqlrp.methods import make_projection, reference

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "mkdocs.yml").exists())
IDS = [12, 4, 10, 9, 6, 7, 0, 5, 2, 11, 8, 3, 1]  # numbers, neither in order nor in text order


def _frame(ids=IDS, d: int = 5, seed: int = 4) -> pd.DataFrame:
    X = np.random.default_rng(seed).normal(size=(len(ids), d))
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(d)], index=pd.Index([f"r{i}" for i in range(len(ids))]))
    df.insert(0, "id", np.asarray(ids, dtype=np.int64))
    return df


# ---- the documentation


def test_the_home_page_quotes_what_the_demo_prints(tmp_path, monkeypatch):
    """The block on docs/index.md is the demo's output line for line (the seconds aside), and what the
    page says of ``s = auto`` is what the demo stored: sqrt(d) = 8 for d = 64 given alone."""
    monkeypatch.chdir(tmp_path)  # the demo's default file, as the page shows it
    printed: list[str] = []
    run_demo(echo=printed.append)
    got = "\n".join(printed).splitlines()
    page = (ROOT / "docs" / "index.md").read_text()
    shown = re.search(r"```text\n(sqlrp demo: .*?)```", page, re.S).group(1).splitlines()
    assert len(shown) == len(got) == 7
    assert shown[0] == got[0] and shown[-1] == got[-1]  # the header, and "(mean over seeds ...; s = auto (...); ...)"
    assert shown[1] == got[1] == "  k  mean_distortion  sd_over_seeds  jl_floor  sql_seconds"
    assert [line.split()[:4] for line in shown[2:6]] == [line.split()[:4] for line in got[2:6]]
    assert "s = auto (sqrt(d) = 8);" in got[-1] and '`{"s": 8.0, "s_requested": "auto"}`' in page
    with sqlrp.connect("sqlrp_demo.duckdb") as db:
        assert sqlrp.load_projection(db, "demo_digits_k20_seed0").params == {"s": 8.0, "s_requested": "auto"}


def test_a_120_character_code_line_fits_or_wraps():
    """docs/stylesheets/extra.css: code wraps instead of scrolling out of sight, and the page is wide
    enough (in rem, as material's sidebars are) for a 120-character line beside both sidebars."""
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text()
    code = re.search(r"\.md-typeset pre > code \{([^}]*)\}", css).group(1)
    assert "white-space: pre-wrap" in code and "overflow-wrap: anywhere" in code
    width = float(re.search(r"\.md-grid \{\s*max-width: ([\d.]+)rem;", css).group(1))
    sidebars, margins = 2 * 12.1, 2 * 1.2  # material 9: .md-sidebar width, .md-content__inner margins
    line = (120 * 0.6 + 2 * 1.1765) * 0.68  # Roboto Mono at 0.68rem (0.8rem text x 0.85), with pre's padding
    assert width - sidebars - margins >= line > 50


@pytest.mark.parametrize("page", ["reference/api", "reference/methods", "guide/methods"])
def test_no_heading_is_doubled(site, page):
    """A method's or a function's name is one heading, not a Markdown heading and mkdocstrings' own."""
    text = (site / page / "index.html").read_text()
    headings = [
        (level, " ".join(html.unescape(re.sub(r"<[^>]+>", "", body)).replace("¶", "").split()))
        for level, body in re.findall(r"<h([1-6])[^>]*>(.*?)</h\1>", text, re.S)
    ]
    assert len(headings) > 5
    for (_, before), (_, after) in zip(headings, headings[1:], strict=False):
        assert before.split()[0] != after.split()[0], (page, before, after)
    same_level = collections.Counter(h for h in headings if h[0] in ("2", "3"))
    assert [h for h, n in same_level.items() if n > 1 and h[1] != "transform"] == []


# ---- ids, their type and order


@pytest.mark.parametrize("engine", ["duckdb", "sqlite"])
def test_numeric_ids_come_back_in_numeric_order(engine, tmp_path):
    df = _frame()
    db = sqlrp.connect("duckdb://" if engine == "duckdb" else f"sqlite:///{tmp_path / 't.sqlite'}")
    try:
        db.write_dataframe("t", df)
        P = make_projection("achlioptas", 5, 3, seed=1, s=3)
        out = sqlrp.project(db, "t", "id", P)
        assert out["id"].tolist() == list(range(13))  # not 0, 1, 10, 11, 12, 2, ...
        assert out["id"].dtype == np.int64
        want = reference.transform(P, df.sort_values("id").iloc[:, 1:].to_numpy())
        np.testing.assert_allclose(out[["p0", "p1", "p2"]].to_numpy(), want, rtol=1e-9)
    finally:
        db.close()


def test_a_files_numeric_ids_are_printed_in_numeric_order(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SQLRP_DB", raising=False)
    path = tmp_path / "emb.parquet"
    _frame().to_parquet(path, index=False)
    assert main(["project", "--table", str(path), "--id-column", "id", "--k", "2", "--s", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "id,p0,p1" and [int(line.split(",")[0]) for line in lines[1:]] == list(range(13))


def test_transform_frame_and_project_agree_row_for_row(duck):
    """The frame's order and index, in memory (NumPy) and in the database alike."""
    df = _frame()
    P = make_projection("achlioptas", 5, 3, seed=2, s=3)
    in_sql = sqlrp.project(duck, df, "id", P)
    in_memory = sqlrp.transform_frame(P, df[[f"f{j}" for j in range(5)]])
    assert in_sql.index.equals(df.index) and in_memory.index.equals(df.index)
    assert in_sql["id"].tolist() == IDS and list(in_memory.columns) == ["p0", "p1", "p2"]
    np.testing.assert_allclose(in_sql[["p0", "p1", "p2"]].to_numpy(), in_memory.to_numpy(), rtol=1e-12)
    assert duck.table_names() == []


# ---- the command line explores without storing


def test_the_command_line_explores_a_table_without_storing_anything(tmp_path, capsys):
    """Rows printed store nothing; asked again with other columns, no stored d stands in the way; an
    integer label beside float features is named on stderr."""
    path = tmp_path / "w.duckdb"
    df = _frame(ids=range(30), d=21)
    df["label"] = np.arange(30) % 4
    with sqlrp.connect(str(path)) as db:
        db.write_dataframe("t", df)
    url = f"duckdb:///{path}"
    assert main(["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "4", "--s", "3"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 31 and "integer column 'label' read as features" in err
    columns = ",".join(f"f{j}" for j in range(20))
    args = ["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "4", "--columns", columns]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "id,p0,p1,p2,p3" and len(out.splitlines()) == 31 and err == ""
    with sqlrp.connect(str(path)) as db:
        assert db.table_names() == ["t"]  # no registry, no projection, no scratch table


# ---- the scikit-learn transformer


def test_the_transformer_chooses_n_components_auto_as_scikit_learn():
    pytest.importorskip("sklearn")
    from sklearn.random_projection import SparseRandomProjection

    from sqlrp.transformer import SQLRandomProjection

    X = np.random.default_rng(5).normal(size=(50, 400))
    ours = SQLRandomProjection("auto", eps=0.5, random_state=0).fit(X)
    theirs = SparseRandomProjection("auto", eps=0.5, random_state=0).fit(X)
    assert ours.n_components_ == theirs.n_components_ == sqlrp.johnson_lindenstrauss_min_dim(50, eps=0.5) == 187
    assert ours.transform(X).shape == (50, 187)
    assert SQLRandomProjection(8, density=0.1, random_state=0).fit(X).projection_.params["s"] == pytest.approx(10.0)
