"""A projection not yet run, with its destinations as methods -- DuckDB's relation, for sqlrp.

    rel = sqlrp.projected(db, "events", "id", k=64)   # nothing runs yet
    rel.df()                                          # the rows as pandas; .arrow(), .pl(), .numpy()
    for chunk in rel.chunks(50_000): ...              # streamed from the database
    rel.to_table("events_rp")                         # one transaction; .to_view(), .to_file("rp.parquet")
    print(rel.sql("spark"))                           # the SQL, for this engine or another

Every destination is :meth:`Relation.send` (:func:`sqlrp.pipeline.running.run`), and
:func:`sqlrp.project` is ``projected(...).send(into, ...)``: the same table, projection and options
draw the same seeded matrix every time; a new projection is stored where rows are written (a table or
a file, under ``save_as`` or a name made of the table, method, k and seed) and nowhere when rows are
handed back or SQL printed (:meth:`Relation.sql`: :func:`sqlrp.plan` and
:func:`sqlrp.pipeline.running.compile_plan`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

from .backends.base import Backend
from .core.errors import InvalidParameter
from .core.layout import Formulation, Target
from .core.lazy import pd
from .core.options import FormulationOptions, PlanOptions, TargetOptions, names, refuse_unknown
from .pipeline.frames import is_frame
from .pipeline.given import check_matrix_origin
from .pipeline.outputs import Projected
from .pipeline.plan import plan
from .pipeline.running import compile_plan, run

#: ``project`` options that say how the SQL is formulated and checked (not what is planned)
_COMPILE = names(FormulationOptions)
#: ``project`` options that choose a destination: the relation's methods do
_DESTINATION = ("into", *names(TargetOptions))


def split_destination(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``options`` of :func:`sqlrp.project` as the relation's and the destination's."""
    relation = {key: value for key, value in options.items() if key not in _DESTINATION}
    return relation, {key: value for key, value in options.items() if key in _DESTINATION}


class ProjectedOptions(PlanOptions, FormulationOptions, total=False):
    """:func:`projected`'s options: :func:`sqlrp.project`'s but where the rows go."""


@dataclass(frozen=True)
class Relation:
    """What to project -- ``table`` (a table, a view, a file or glob on DuckDB, or a DataFrame /
    Arrow table), its ``id_column``, the ``projection`` (a stored name, a projection object or file,
    or ``None`` and ``options`` such as ``method``, ``k``, ``seed``) and the other options of
    :func:`sqlrp.project` -- and where it can go.  Made by :func:`projected`.

    :param db: the connection (:func:`sqlrp.connect`).
    :param table: a table or view, a file or glob (DuckDB), or a DataFrame / Arrow table.
    :param id_column: the column copied to the output as each row's key.
    :param projection: a stored projection's name, a :class:`~sqlrp.core.ir.Projection`, a projection
        file, or ``None`` for a new one of ``options``' ``method``, ``k`` and ``seed``.
    :param options: the other options of :func:`sqlrp.project` but the destination's
        (:class:`ProjectedOptions`).
    """

    db: Backend
    table: Any
    id_column: str
    projection: Any = None
    options: dict[str, Any] = field(default_factory=dict)

    def send(self, into: str | None = None, **destination: Unpack[TargetOptions]) -> Projected:
        """The rows sent where :func:`sqlrp.project` sends them: back to Python (``into=None``), or into
        the table, view or file ``into``; ``destination``: :class:`~sqlrp.core.options.TargetOptions`."""
        return run(self.db, self.table, self.id_column, self.projection, {**self.options, **destination}, into)

    def df(self) -> pd.DataFrame:
        """The projected rows as a pandas DataFrame, ordered by id (a frame's rows: in its order)."""
        return self.send(output_format="pandas")

    def arrow(self) -> Any:
        """The projected rows as a ``pyarrow.Table``."""
        return self.send(output_format="arrow")

    def pl(self) -> Any:
        """The projected rows as a polars DataFrame."""
        return self.send(output_format="polars")

    def numpy(self) -> tuple[Any, Any]:
        """``(ids, Y)``: the ids and the ``n x k`` projected matrix."""
        return self.send(output_format="numpy")

    def chunks(self, rows: int = 100_000, output_format: str = "pandas") -> Iterator[Any]:
        """The projected rows in chunks of at most ``rows``, streamed from the database."""
        if rows is None:  # not "no chunks": .df() hands back the whole frame
            raise InvalidParameter("chunks(rows) needs a whole number of rows >= 1, got None; .df() gives all rows")
        return self.send(chunk_rows=rows, output_format=output_format)

    def to_table(
        self, name: str, *, replace: bool = False, incremental: bool = False, progress: bool | int = False
    ) -> None:
        """Materialise the rows as the table ``name``, whole or not at all (``incremental``: add the ids
        not in it yet; ``progress``: a bar, or that many id-range batches)."""
        self.send(name, replace=replace, incremental=incremental, progress=progress)

    def to_view(self, name: str, *, replace: bool = False) -> None:
        """Create the view ``name``: the projection's SQL over the table, run when the view is read."""
        self.send(name, view=True, replace=replace)

    def to_file(self, path: str | Path, *, replace: bool = False) -> list[Path]:
        """Write the rows to a ``.parquet``, ``.csv`` or ``.json`` file (by DuckDB), the projection beside
        it in ``<file>.sqlrp.json``; returns the files written."""
        if not str(path).lower().endswith((".parquet", ".csv", ".json")):
            raise InvalidParameter(
                f"to_file writes .parquet, .csv or .json files, not {str(path)!r}; to_table writes a table"
            )
        return self.send(str(path), replace=replace)

    def sql(self, dialect: str | None = None, *, into: str | None = None, view: bool = False) -> str:
        """The SQL of this projection for ``dialect`` (default: the database's own), one ``SELECT`` (or
        ``CREATE TABLE into AS`` / ``CREATE VIEW``): :func:`sqlrp.compile_projection` of its plan.  A
        new projection without a name is planned and stored nowhere: its matrix is in the SQL."""
        if is_frame(self.table):
            raise InvalidParameter("a DataFrame has no name in the database: write it to a table, then ask its SQL")
        how = Formulation(**{key: self.options[key] for key in _COMPILE if key in self.options})
        planned = {key: value for key, value in self.options.items() if key not in _COMPILE}
        check_matrix_origin(self.db, how.matrix, self.projection)  # as every destination checks it
        if self.projection is None and not planned.get("save_as"):
            planned["store"] = False
        p = plan(self.db, self.table, self.id_column, self.projection, **planned)
        return compile_plan(self.db, p, dialect, Target(into=into, view=view), how)


def projected(
    db: Backend,
    table: Any,
    id_column: str,
    projection: Any = None,
    *,
    method: str | None = None,
    k: int | None = None,
    seed: int | None = None,
    **options: Unpack[ProjectedOptions],
) -> Relation:
    """A lazy projection of ``table`` (:class:`Relation`): nothing runs until a destination is called --
    ``.df()``, ``.arrow()``, ``.pl()``, ``.numpy()``, ``.chunks(n)``, ``.to_table(name)``,
    ``.to_view(name)``, ``.to_file(path)`` or ``.sql(dialect)``.  ``options`` are those of
    :func:`sqlrp.project` but the destination's own (``into``, ``view``, ``chunk_rows``,
    ``output_format``, ...), which the methods take.

    ``db``, ``table``, ``id_column``, ``projection``, ``method``, ``k`` and ``seed`` are
    :func:`sqlrp.project`'s.

    :param options: :class:`ProjectedOptions` -- the input, a new projection's parameters and the output
        (:class:`~sqlrp.core.options.PlanOptions`), how the SQL is written
        (:class:`~sqlrp.core.options.FormulationOptions`).
    :returns: the relation; nothing has run yet.
    """
    given = sorted(set(options) & set(_DESTINATION))
    if given:
        raise InvalidParameter(
            f"projected() takes no {', '.join(given)}: the relation's methods choose where the rows go "
            "(.df(), .chunks(n), .to_table(name), .to_view(name), .to_file(path), .sql(dialect))"
        )
    refuse_unknown("projected", options, (*names(ProjectedOptions), *_DESTINATION))
    new = {key: value for key, value in dict(method=method, k=k, seed=seed).items() if value is not None}
    return Relation(db, table, id_column, projection, {**new, **options})


__all__ = ["Relation", "projected", "split_destination"]
