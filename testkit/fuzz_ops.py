"""The differential fuzzer's operations (issue 31): a method and its parameters, valid and invalid.

:func:`operations` draws one; ``op.invalid`` names why it must be refused (``None``: a valid
request, which must give the reference's numbers -- or, where the engine cannot do it, a clean
refusal).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

METHODS = ("achlioptas", "achlioptas", "gaussian", "p-rp", "pk-rp", "maclaurin", "rff")
ENTRIES = ("api", "api_into", "cli", "compile", "files", "transformer", "transform_frame")


@dataclasses.dataclass
class Op:
    method: str
    k: Any
    params: dict
    seed: int
    strategy: str = "auto"
    block: Any = None
    standardize: bool = False
    nulls: str = "error"
    output: str = "wide"
    dtype: str = "float64"
    prefix: str = "p"
    chunk_rows: Any = None
    explicit_columns: bool = True
    invalid: str | None = None
    entry: str = "api"
    into: str = "out"
    replace: bool = False

    def api_options(self) -> dict:
        opts: dict[str, Any] = dict(method=self.method, k=self.k, seed=self.seed, **self.params)
        opts.update(strategy=self.strategy, block=self.block, standardize=self.standardize, nulls=self.nulls)
        opts.update(output=self.output, dtype=self.dtype, prefix=self.prefix)
        return opts

    def cli_options(self) -> list[str]:
        args = ["--method", self.method, "--k", str(self.k), "--seed", str(self.seed)]
        for name, value in self.params.items():
            args += [f"--{name}", str(value)]
        args += ["--strategy", self.strategy, "--nulls", self.nulls, "--output", self.output, "--dtype", self.dtype]
        args += ["--prefix", self.prefix]
        if self.block is not None:
            args += ["--block", str(self.block)]
        if self.standardize:
            args.append("--standardize")
        return args


def _bad(draw: st.DrawFn, valid: st.SearchStrategy, invalid: list, why: str, reasons: list[str], bad: bool) -> Any:
    """A valid value; or, if ``bad`` (one operation in four), 1 time in 3 an invalid one, its reason
    appended to ``reasons``."""
    if not bad or draw(st.integers(0, 2)) != 2:
        return draw(valid)
    value = draw(st.sampled_from(invalid))
    reasons.append(f"{why} = {value!r}")
    return value


def _rff_params(draw: st.DrawFn, reasons: list[str], bad: bool) -> dict[str, Any]:
    """``kernel``, ``gamma`` and ``weights`` of an ``rff`` operation; the Laplacian kernel takes i.i.d. (Cauchy)
    weights only, so another choice there is invalid."""
    kernel = draw(st.sampled_from(["rbf", "rbf", "laplacian"]))
    gamma = _bad(draw, st.sampled_from(["scale", 0.5, 0.01, 3.0]), [0, -1.5], "gamma", reasons, bad)
    weights = draw(st.sampled_from(["gaussian", "orthogonal", "structured", "signs"]))
    if kernel == "laplacian" and weights != "gaussian":
        reasons.append(f"weights = {weights!r} for the laplacian kernel")
    return {"kernel": kernel, "gamma": gamma, "weights": weights}


@st.composite
def operations(draw: st.DrawFn, d: int, entries: tuple[str, ...] = ENTRIES, id_name: str = "id") -> Op:
    reasons: list[str] = []
    bad = draw(st.integers(0, 3)) == 3  # hypothesis favours 0: valid
    method = draw(st.sampled_from(METHODS))
    k = _bad(draw, st.integers(1, 5), [0, -2, 1.5, "abc"], "k", reasons, bad)
    params: dict[str, Any] = {}
    if method == "achlioptas":
        params["s"] = _bad(draw, st.sampled_from([1, 3, "auto", 2.5]), [0, -1, 0.5], "s", reasons, bad)
    elif method == "p-rp":
        params["m"] = _bad(draw, st.sampled_from([2, 4]), [0, -2], "m", reasons, bad)
        params["s"] = draw(st.sampled_from([1, 3]))
    elif method == "pk-rp":
        params["degree"] = _bad(draw, st.integers(1, 3), [0, -1], "degree", reasons, bad)
        params["t"] = _bad(draw, st.integers(1, 3), [0, -3], "t", reasons, bad)
    elif method == "maclaurin":
        params["degree"] = _bad(draw, st.integers(0, 3), [-1, -4], "degree", reasons, bad)  # 0: the constant map
        params["c"] = draw(st.sampled_from([0.0, 1.0, 2.5]))
    elif method == "rff":  # random Fourier features: cos of the linear stage (issue 44)
        params.update(_rff_params(draw, reasons, bad))
    strategy = draw(st.sampled_from(["auto", "auto", "inline", "pairs", "mailman"]))
    block = None
    if strategy == "mailman" and draw(st.booleans()):
        block = _bad(draw, st.integers(1, d), [0, -1, -7], "block", reasons, bad)
    entry = draw(st.sampled_from(entries))
    chunk_rows = None
    if entry in ("api", "api_frame") and draw(st.integers(0, 3)) == 3:
        chunk_rows = _bad(draw, st.integers(1, 4), [0, -1], "chunk_rows", reasons, bad)
    prefix = draw(st.sampled_from(["p", "p", "q_", "w", "_x", 'o"ut ']))
    op = Op(
        method=method,
        k=k,
        params=params,
        seed=draw(st.integers(0, 3)),
        strategy=strategy,
        block=block,
        standardize=draw(st.integers(0, 3)) == 3,
        nulls=draw(st.sampled_from(["error", "error", "zero"])),
        output=draw(st.sampled_from(["wide", "wide", "wide", "array"])),
        dtype=draw(st.sampled_from(["float64", "float64", "float64", "float32"])),
        prefix=prefix,
        chunk_rows=chunk_rows,
        explicit_columns=draw(st.booleans()),
        entry=entry,
        into=draw(st.sampled_from(["out", "out", "Out t", "p0", "sqlrp_projection", "SOURCE"])),
        replace=draw(st.booleans()),
    )
    if op.into == "sqlrp_projection" and entry == "api_into":
        reasons.append("into a registry table")
    op.invalid = "; ".join(reasons) or None
    return op
