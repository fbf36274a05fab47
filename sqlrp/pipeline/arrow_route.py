"""``project``'s Arrow route (issue 44): the linear sums by BLAS, the rest by the same compiled SQL.

A dense matrix costs ``d`` multiply-adds per output and row written as SQL expressions (random Fourier
features, 300 x 256: 76,800 a row), where BLAS does them an order of magnitude faster.  On an in-process
engine (``Backend.streams_arrow``: DuckDB) the ``arrow`` route therefore

1. reads the features -- the same relation the SQL route reads (:func:`sqlrp.compiler.dense_source`, its input
   checks riding along; a standardised input: :func:`sqlrp.compiler.preprocess.standardized_relation`) --
   as Arrow record batches of about :data:`BATCH_BYTES` on a cursor of their own (bounded memory, never the
   whole table);
2. computes each batch's linear sums ``K = X W`` (``p`` per row, float64, the stored matrix, no bias) in
   NumPy;
3. hands the batches back to the engine as a relation of the key and ``_k0 .. _k{p-1}``, read by the plan
   :func:`sqlrp.pipeline.column_blocks.sum_plan` makes for column blocks (issue 42): the identity linear
   stage with the projection's bias, its combiner, output function (``cos``, ``sign``), scale and output
   type, compiled by the same compiler, its checks riding along -- and written where the SQL route writes
   (a file through the same staging and rename, a table in one transaction, rows back), with the same
   column names, types and order.

A NULL feature makes the sums it enters NULL, as in SQL (the checks then refuse it, as the SQL route's do);
a non-finite one enters only the sums whose weight is not 0, as in SQL.  ``route="auto"`` takes the
Arrow route where it can (:func:`arrow_refusal`), the matrix is dense (:data:`DENSE_SHARE`) and the device
is not a small one (its scan is fitted to its memory, :mod:`sqlrp.backends.scan_fit`);
``route="sql"`` never (``compile`` prints the SQL route's statement either way).  Measured: ``bench/rff.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..backends import Backend
from ..compiler import dense_source
from ..compiler.lists import dense_rows
from ..compiler.preprocess import standardized_relation
from ..core.errors import InvalidParameter, need
from ..core.ir import LinearStage, Projection
from ..core.layout import Formulation, Target
from ..core.plan import Plan
from ..methods.reference import DENSE_ENTRIES, linear_outputs
from .column_blocks import feature_blocks, sum_plan
from .materialise import unreplayable
from .plan import decide
from .progress import CommandBar, asked

#: ``route="auto"`` takes the Arrow route where at least this share of the matrix's entries is not 0: a dense
#: matrix (Gaussian, orthogonal, structured and fitted ones), whose SQL is ``d`` multiply-adds per output and row.
#: A sparse sign matrix stays in SQL, additions only (the Arrow route is there to ask for: measured on 50,000 x 300
#: float32 Parquet -> Parquet, k = 256, medians of 3, load 7-8, its time over the SQL route's was 0.56 for
#: Achlioptas ``s = 3``, 0.85 for ``s = sqrt(300)``, 1.64 for ``s = 25``, 2.31 for ``s = 50``); the dense rff
#: weights: 0.26 at 200,000 rows (``bench/rff.py``)
DENSE_SHARE = 0.5
#: ... and where the multiply-adds (rows x the matrix's non-zero entries) are at least this many: below it the
#: Arrow route's fixed cost (a second cursor, and pyarrow's import: 0.30-0.35 s on the loaded 2-core machine,
#: ``python -X importtime -c 'import duckdb; import pyarrow'``) is more than the SQL it saves, and a stored
#: projection's statement is kept for the next run (:mod:`sqlrp.start`); an input whose rows are not known: Arrow
ARROW_WORK = 10**8
#: bytes of float64 features per Arrow batch (as ``sqlrp fit``'s Arrow route)
BATCH_BYTES = 32 << 20


def arrow_refusal(db: Backend, p: Plan, target: Target, progress: bool | int | CommandBar) -> str | None:
    """Why the Arrow route cannot run ``p`` into ``target`` (``None``: it can)."""
    why = early_refusal(db, p.source.layout, target, progress)
    if why is not None:
        return why
    if not isinstance(p.projection, Projection):
        return f"the {p.projection.method} composition's second stage reads the first's outputs in SQL"
    if feature_blocks(db, p.source) is not None:
        return "the input's row groups do not fit the engine's memory: it is read in column blocks, in SQL"
    return None


def early_refusal(db: Backend, layout: str, target: Target, progress: bool | int | CommandBar) -> str | None:
    """:func:`arrow_refusal`'s reasons known before anything is planned (the engine, the layout, the target)."""
    if not getattr(db, "streams_arrow", False):
        return f"{db.dialect} runs outside this process (only an in-process engine, DuckDB, streams Arrow to NumPy)"
    if importlib.util.find_spec("pyarrow") is None:  # the light core: auto takes the SQL route
        return "pyarrow is not installed (pip install 'sqlrp[arrow]')"
    if layout == "long":
        return "the long layout's sums are joins and GROUP BYs in SQL (the Arrow route reads wide or array rows)"
    if target.view:
        return "a view is computed whenever it is read, in SQL"
    if target.incremental:
        return "--incremental adds the ids not yet written, chosen in SQL"
    if target.chunk_rows:
        return (
            "rows handed back in chunks (--chunk-rows, or CSV printed without --into) are read after the Arrow "
            "stream has ended: write them --into a table or file"
        )
    if not isinstance(asked(progress), bool):
        return "--batches runs id-range statements (the Arrow route is one stream)"
    return None


def refuse_early(db: Backend, layout: str, target: Target, progress: bool | int | CommandBar) -> None:
    """``route="arrow"`` refused before any work where :func:`early_refusal` gives a reason."""
    why = early_refusal(db, layout, target, progress) if target.route == "arrow" else None
    if why is not None:
        raise InvalidParameter(f"route 'arrow' cannot run this projection: {why}; use route 'sql' or 'auto'")


def choose_route(db: Backend, p: Plan, target: Target, progress: bool | int | CommandBar) -> str:
    """``sql`` or ``arrow`` for ``target.route``: ``arrow`` refused in one line where it cannot run; ``auto``:
    ``arrow`` where it can, at least :data:`DENSE_SHARE` of the matrix is not 0 and the work is
    :data:`ARROW_WORK` or more."""
    if target.route == "sql":
        return "sql"
    why = arrow_refusal(db, p, target, progress)
    if target.route == "arrow":
        if why is not None:
            raise InvalidParameter(f"route 'arrow' cannot run this projection: {why}; use route 'sql' or 'auto'")
        return "arrow"
    if why is not None:
        return "sql"
    budget = getattr(db, "budget", None)
    if budget is not None and budget.small:  # a small device: the SQL route's scan is fitted to its memory
        return "sql"
    linear = p.projection.linear  # type: ignore[union-attr]
    if p.source.rows is not None and p.source.rows * linear.nnz < ARROW_WORK:
        return "sql"
    return "arrow" if linear.nnz >= DENSE_SHARE * linear.d * linear.p else "sql"


def batch_rows(d: int) -> int:
    """Rows per Arrow batch: :data:`BATCH_BYTES` of float64 features, at least 1,024."""
    return max(1024, BATCH_BYTES // (8 * max(d, 1)))


def feature_sql(db: Backend, p: Plan) -> str:
    """The SQL route's input relation: the key, the group key where pooled, then the ``d`` features as
    doubles (NULL as 0 under ``nulls="zero"``; standardised where asked), the input checks along (``guard``)."""
    dialect, source = db.sql_dialect, p.source
    if source.standardize is not None:
        means, stds = source.standardize
        plain = dataclasses.replace(source, standardize=None)
        return dialect.render(standardized_relation(p.projection, plain, dialect, means, stds)[0])
    return dialect.render(dense_source(p.projection, source, dialect, checked=p.how.guard))


class Sums:
    """``K = X W`` of a batch's features ``Xt`` (``d x rows``): by one BLAS product with the dense matrix where
    it is small (:data:`~sqlrp.methods.reference.DENSE_ENTRIES`), else by the reference's sparse product.

    Unchecked (``check=False``), a NULL or non-finite feature gives the sums the SQL route's ``strategy`` gives:
    ``list_transform`` reads NULL as 0 (``nulls_zero``), the others make NULL every sum it enters; its dense
    rows multiply every weight (``0 * inf`` is NaN), the others only the weights that are not 0 (``sparse``)."""

    def __init__(self, linear: LinearStage, strategy: str) -> None:
        self.linear = dataclasses.replace(linear, bias=None)  # the bias: added by the compiled SQL
        self.nulls_zero = strategy == "list_transform"
        self.sparse = not (self.nulls_zero and dense_rows(linear))
        self.Wt: np.ndarray | None = None
        if linear.power is None and linear.d * linear.p <= DENSE_ENTRIES:
            self.Wt = np.zeros((linear.p, linear.d))
            np.add.at(self.Wt, (linear.vector, linear.feature), linear.weight)

    def __call__(self, Xt: np.ndarray) -> np.ndarray:
        """``Kt`` (``p x rows``)."""
        if self.Wt is None:
            return np.ascontiguousarray(linear_outputs(self.linear, Xt.T).T)
        with np.errstate(invalid="ignore", over="ignore"):
            Kt = self.Wt @ Xt
            if self.sparse:
                for r in np.flatnonzero(~np.isfinite(Xt).all(axis=0)):  # a non-finite feature: its weights not 0
                    Kt[:, r] = np.where(self.Wt != 0, self.Wt * Xt[:, r], 0.0).sum(axis=1)
        return Kt

    def null_sums(self, nulls: np.ndarray) -> np.ndarray:
        """Which sums (``p x rows``) a NULL feature (``nulls``: ``d x rows``) enters with a weight that is not 0."""
        used = np.zeros((self.linear.p, self.linear.d))
        used[self.linear.vector, self.linear.feature] = 1.0
        return (used @ nulls.astype(np.float64)) > 0


def _batches(
    reader: Any, schema: Any, sums: Sums, keys: int, failed: list[BaseException], report: Callable[[int], None]
) -> Iterator[Any]:
    """The record batches of the key(s) and ``_k0 ..``; ``report(rows)`` after each; an error of the reader is
    kept in ``failed`` (the engine that consumes the stream words it as its own)."""
    pa = need("pyarrow", "arrow", "the Arrow route")
    done = 0
    try:
        for batch in reader:
            n = batch.num_rows
            if not n:
                continue
            d = batch.num_columns - keys
            Xt = np.empty((d, n))
            nulls = None
            for i in range(d):
                column = batch.column(keys + i)
                Xt[i] = column.to_numpy(zero_copy_only=False)
                if column.null_count:
                    nulls = np.zeros((d, n), dtype=bool) if nulls is None else nulls
                    nulls[i] = column.is_null().to_numpy(zero_copy_only=False)
                    Xt[i, nulls[i]] = 0.0
            Kt = sums(Xt)
            masked = sums.null_sums(nulls) if nulls is not None and not sums.nulls_zero else None
            arrays = [pa.array(Kt[v], mask=None if masked is None else masked[v]) for v in range(Kt.shape[0])]
            yield pa.RecordBatch.from_arrays([*batch.columns[:keys], *arrays], schema=schema)
            done += n
            report(done)
    except BaseException as exc:
        failed.append(exc)
        raise


def _reporter(p: Plan, progress: bool | int | CommandBar) -> Callable[[int], None]:
    """``report(rows read)`` moving the command's bar (the engine reports no progress through a Python stream):
    the rows as a share of the table's estimated rows."""
    total = p.source.rows
    if not isinstance(progress, CommandBar) or not total:
        return lambda rows: None
    statement = progress.statement()
    return lambda rows: statement(min(99.0, 100.0 * rows / total))


@contextlib.contextmanager
def arrow_sums(db: Backend, p: Plan, progress: bool | int | CommandBar = False) -> Iterator[Plan]:
    """The plan whose compiled statement writes ``p``'s rows from an Arrow stream of its linear sums
    (module doc): :func:`~sqlrp.pipeline.column_blocks.sum_plan` over the stream's relation, decided with the
    checks ``p`` carries.  Read once, by one statement.  An error of the reading side is raised as itself.
    ``progress``: the command's bar, moved as the batches are read."""
    pa = need("pyarrow", "arrow", "the Arrow route")
    proj, source = p.projection, p.source
    assert isinstance(proj, Projection)
    keys = 2 if source.group_column else 1
    failed: list[BaseException] = []
    with db.arrow_reader(feature_sql(db, p), batch_rows(proj.d)) as reader:  # type: ignore[attr-defined]
        names = [source.id_column, *([source.group_column] if source.group_column else [])]
        fields = [reader.schema.field(i).with_name(name) for i, name in enumerate(names)]
        schema = pa.schema([*fields, *[pa.field(f"_k{v}", pa.float64()) for v in range(proj.linear.p)]])
        # checked, a NULL feature makes NULL each sum it enters (refused by the compiled checks, whatever the
        # strategy); unchecked, the SQL route's strategy decides (:class:`Sums`)
        sums = Sums(proj.linear, "inline" if p.how.check else p.how.strategy)
        batches = _batches(reader, schema, sums, keys, failed, _reporter(p, progress))
        stream = pa.RecordBatchReader.from_batches(schema, batches)
        with db.arrow_relation(stream) as view, unreplayable("the Arrow route's stream"):  # type: ignore[attr-defined]
            # inline: each output reads its own sum (a dot product with the identity would make 0 * inf a NaN)
            asked_how = Formulation(strategy="inline", check=p.how.guard, bind=p.how.bind)
            wide = dataclasses.replace(source, layout="wide", array_column=None)
            try:
                yield decide(db, sum_plan(dataclasses.replace(p, source=wide), view), asked_how, guard=True)
            except BaseException as exc:
                if failed and failed[0] is not exc:
                    raise failed[0] from exc
                raise


__all__ = [
    "BATCH_BYTES",
    "DENSE_SHARE",
    "arrow_refusal",
    "arrow_sums",
    "batch_rows",
    "choose_route",
    "early_refusal",
    "feature_sql",
    "refuse_early",
]
