"""The registry of stored projections: versioned migrations, save, load, list, drop.

Once stored, the tables are the source of truth for a projection; the seed only made it repeatable.
The tables are defined once, in :mod:`sqlrp.registry.schema`, and rendered for the database's
dialect; each registry version is applied in order, in its own transaction, and recorded in
``sqlrp_schema_version`` under its file name (``0001_registry.sql`` ...: the rendered record in
``migrations/<dialect>/``); re-running them is a no-op.  An engine on which sqlrp keeps no registry
refuses with :class:`~sqlrp.core.errors.EngineLimit`, naming what to do instead.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import numpy as np

from ..backends import Backend
from ..compiler.strategies import pairs_budget
from ..core.errors import InvalidParameter, ProjectionExists, ProjectionNotFound, refuse_nul
from ..core.ir import Combiner, Composed, LinearStage, Projection
from ..core.lazy import pd
from ..core.pairs_plan import PairsPlan, signs_of
from ..dialects import SqlrpDialect, get_dialect
from .schema import LATEST, OWNED_TABLES, VERSIONS, bootstrap, statements
from .schema import REGISTRY_TABLES as REGISTRY_TABLES  # every table the registry owns: never an output
from .schema import VERSION_TABLE as _VERSION_TABLE
from .schema import migration_files as migration_files  # (version, file name, SQL) per registry version

VERSION_TABLE = _VERSION_TABLE.name
# A composed projection (sqlrp.core.ir.Composed) is stored as its two stages under derived names plus one
# sqlrp_projection row (p = 0, scale = 1, no matrix rows) whose params hold the stage names under this key.
STAGES_KEY = "_stages"


def stage_names(name: str) -> list[str]:
    """Names under which the stages of the composed projection ``name`` are stored."""
    return [f"{name}__stage1", f"{name}__stage2"]


def bootstrap_sql(dialect: str) -> str:
    """The statement that creates the version table (:func:`sqlrp.registry.schema.bootstrap`)."""
    return bootstrap(dialect)


def _statements(sql: str) -> list[str]:
    """The statements of a SQL script (``--`` comment lines dropped, split at ``;``)."""
    text = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]


class Registry:
    """Stored projections in one database."""

    def __init__(self, backend: Backend, migrate: bool = True):
        self.backend = backend
        if migrate:
            self.migrate()

    @classmethod
    def of(cls, backend: Backend) -> Registry:
        """The registry of the connection ``backend``: made, and its tables created or upgraded, on the
        connection's first use of it; the same object afterwards (it lives and dies with the connection),
        made again only if its version table was dropped meanwhile (one catalogue lookup a use)."""
        held = backend.__dict__.get("_sqlrp_registry")
        if held is None or not backend.table_exists(VERSION_TABLE):
            held = backend.__dict__["_sqlrp_registry"] = cls(backend)
        return held

    def version(self) -> int:
        self.backend.execute(bootstrap(self.backend.dialect))
        rows = self.backend.fetchall(f"SELECT max(version) FROM {VERSION_TABLE}")
        return int(rows[0][0] or 0)

    def migrate(self) -> list[str]:
        """Apply the migrations not yet applied; returns their file names.  Processes that start on a
        fresh database at once take turns: the set-up runs under one lock (PostgreSQL: an advisory
        lock, ``Backend.lock``) and the version is read again once it is held."""
        bootstrap(self.backend.dialect)  # refuses an engine without a registry before anything is read
        if self.backend.table_exists(VERSION_TABLE) and self.version() >= LATEST:
            return []  # the common case: nothing to do, no lock taken
        applied = []
        with self.backend.transaction():
            self.backend.lock("sqlrp migrations")
            current = self.version()
            for version in VERSIONS:
                if version.number <= current:
                    continue
                with self.backend.transaction():
                    for statement in statements(version, self.backend.dialect):
                        self.backend.execute(statement)
                    self.backend.execute(
                        f"INSERT INTO {VERSION_TABLE} (version, name) VALUES (?, ?)", [version.number, version.file]
                    )
                applied.append(version.file)
        return applied

    def exists(self, name: str) -> bool:
        refuse_nul(name, "projection name")
        return bool(self.backend.fetchall("SELECT 1 FROM sqlrp_projection WHERE name = ?", [name]))

    def save(
        self, projection: Projection | Composed, name: str | None = None, replace: bool = False
    ) -> Projection | Composed:
        """Store ``projection`` under ``name`` (its rows and metadata, in one transaction)."""
        name = name or projection.name
        if not name:
            raise InvalidParameter("a stored projection needs a name")
        refuse_nul(name, "projection name")
        if isinstance(projection, Composed):
            return self._save_composed(projection, name, replace)
        lin, comb = projection.linear, projection.combiner
        with self._atomic(name):
            self._make_room(name, replace)
            self.backend.execute(
                "INSERT INTO sqlrp_projection (name, method, params, d, k, p, seed, scale) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    name,
                    projection.method,
                    json.dumps(projection.params),
                    projection.d,
                    projection.k,
                    lin.p,
                    projection.seed,
                    float(projection.scale),
                ],
            )
            # column blocks, not DataFrames: DuckDB reads NumPy arrays directly (sqlrp.core.lazy)
            blocks: dict[str, dict[str, object]] = {
                "sqlrp_linear_entry": {
                    "projection": name,
                    "vector": lin.vector.astype(np.int32),
                    "feature": lin.feature.astype(np.int32),
                    "weight": np.asarray(lin.weight, dtype=np.float64),
                },
                "sqlrp_combiner_term": {
                    "projection": name,
                    "term": np.arange(comb.n_terms, dtype=np.int32),
                    "component": comb.term_component.astype(np.int32),
                    "weight": np.asarray(comb.term_weight, dtype=np.float64),
                },
                "sqlrp_combiner_factor": {
                    "projection": name,
                    "term": comb.factor_term.astype(np.int32),
                    "position": _positions(comb.factor_term),
                    "vector": comb.factor_vector.astype(np.int32),
                },
            }
            if lin.bias is not None or lin.power is not None:
                blocks["sqlrp_linear_vector"] = {
                    "projection": name,
                    "vector": np.arange(lin.p, dtype=np.int32),
                    "bias": lin.bias if lin.bias is not None else np.zeros(lin.p),
                    "power": (lin.power if lin.power is not None else np.ones(lin.p)).astype(np.int32),
                }
            for table, columns in blocks.items():
                if any(isinstance(v, np.ndarray) and len(v) for v in columns.values()):
                    self.backend.insert_columns(table, columns)
        projection.name = name
        return projection

    @contextlib.contextmanager
    def _atomic(self, name: str) -> Iterator[None]:
        """One transaction; on engines without transactions (Spark, ClickHouse) a failure deletes
        whatever rows of ``name`` were written, so no half-stored projection is left."""
        if self.backend.transactional:
            with self.backend.transaction():
                # writers of one name take turns (PostgreSQL), so "exists" is read under the lock: of
                # several processes storing the same name, one stores it, the others get ProjectionExists
                self.backend.lock(f"sqlrp projection {name}")
                yield
            return
        existed = self.exists(name)
        try:
            yield
        except BaseException:
            if not existed:
                with contextlib.suppress(Exception):
                    self._delete(name)
            raise

    def _make_room(self, name: str, replace: bool) -> None:
        """Delete the stored ``name`` if ``replace``, else refuse to overwrite it."""
        if self.exists(name):
            if not replace:
                raise ProjectionExists(
                    f"a projection named {name!r} already exists; reuse it, drop it "
                    f"(sqlrp projections drop {name!r}) or choose another name"
                )
            self._delete(name)

    def _save_composed(self, composed: Composed, name: str, replace: bool) -> Composed:
        names = stage_names(name)
        with self._atomic(name):
            self._make_room(name, replace)
            for stage, stage_name in zip(composed.stages, names, strict=True):
                self.save(stage, stage_name, replace=replace)
            self.backend.execute(
                "INSERT INTO sqlrp_projection (name, method, params, d, k, p, seed, scale) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    name,
                    composed.method,
                    json.dumps({**composed.params, STAGES_KEY: names}),
                    composed.d,
                    composed.k,
                    0,
                    composed.seed,
                    1.0,
                ],
            )
        composed.name = name
        return composed

    def load(self, name: str) -> Projection | Composed:
        """The stored projection ``name``, rebuilt from its rows."""
        refuse_nul(name, "projection name")
        rows = self.backend.fetchall(
            "SELECT method, params, d, k, p, seed, scale FROM sqlrp_projection WHERE name = ?", [name]
        )
        if not rows:
            known = [r[0] for r in self.backend.fetchall("SELECT name FROM sqlrp_projection ORDER BY name")]
            hint = f" Stored: {', '.join(known[:20])}" if known else " No projections are stored here yet."
            raise ProjectionNotFound(f"no stored projection named {name!r}.{hint}")
        method, params, d, k, p, seed, scale = rows[0]
        params = params if isinstance(params, dict) else json.loads(params)
        if STAGES_KEY in params:
            first, second = (self.load(stage) for stage in params.pop(STAGES_KEY))
            return Composed(first=first, second=second, method=method, params=params, seed=seed, name=name)
        entries = self._array(
            "SELECT vector, feature, weight FROM sqlrp_linear_entry WHERE projection = ? ORDER BY vector, feature",
            name,
            3,
        )
        vectors = self._array(
            "SELECT vector, bias, power FROM sqlrp_linear_vector WHERE projection = ? ORDER BY vector", name, 3
        )
        terms = self._array(
            "SELECT term, component, weight FROM sqlrp_combiner_term WHERE projection = ? ORDER BY term", name, 3
        )
        factors = self._array(
            "SELECT term, position, vector FROM sqlrp_combiner_factor WHERE projection = ? ORDER BY term, position",
            name,
            3,
        )
        bias = power = None
        if len(vectors):
            bias, power = np.zeros(p), np.ones(p, dtype=np.int64)
            bias[vectors[:, 0].astype(int)] = vectors[:, 1]
            power[vectors[:, 0].astype(int)] = vectors[:, 2]
            bias = bias if np.any(bias) else None
            power = power if np.any(power != 1) else None
        linear = LinearStage(
            d=d, p=p, vector=entries[:, 0], feature=entries[:, 1], weight=entries[:, 2], bias=bias, power=power
        )
        combiner = Combiner(
            k=k,
            term_component=terms[:, 1],
            term_weight=terms[:, 2],
            factor_term=factors[:, 0],
            factor_vector=factors[:, 2],
        )
        return Projection(
            method=method, linear=linear, combiner=combiner, scale=float(scale), params=params, seed=seed, name=name
        )

    def load_pairs(self, projection: Projection, dialect: SqlrpDialect | str) -> PairsPlan | None:
        """The ``pairs`` plan stored beside ``projection`` for ``dialect``'s column budget, or ``None``
        (none stored, or a stale one that no longer computes the stored matrix).  The registry stores
        and loads plans; it does not make them (:func:`sqlrp.pipeline.plan.pairs_for` does)."""
        name, lin = projection.name, projection.linear
        if not name:
            return None
        rows = self.backend.fetchall(
            "SELECT node, level, reads, sign FROM sqlrp_pairs_entry WHERE projection = ? AND budget = ? "
            "ORDER BY node, reads",
            [name, _budget_key(lin, dialect)],
        )
        stored = _plan_from_rows(np.array(rows, dtype=np.int64), lin.d, lin.p) if rows else None
        return stored if stored is not None and stored.computes(lin) else None

    def save_pairs(self, projection: Projection, dialect: SqlrpDialect | str, plan: PairsPlan) -> bool:
        """Store a complete ``plan`` beside ``projection`` (replacing a stale one), in one transaction, so
        that later processes skip planning; only where this registry holds ``projection`` under its name
        with the same sign matrix.  Returns whether it was stored."""
        name, lin = projection.name, projection.linear
        if not name or not plan.complete or not self._holds(name, lin):
            return False
        key = _budget_key(lin, dialect)
        with self.backend.transaction():
            self.backend.execute("DELETE FROM sqlrp_pairs_entry WHERE projection = ? AND budget = ?", [name, key])
            self.backend.insert_columns("sqlrp_pairs_entry", _plan_rows(plan, name, key))
        return True

    def _holds(self, name: str, linear: LinearStage) -> bool:
        """True if ``name`` is stored here with the same sign matrix as ``linear``."""
        if not self.exists(name):
            return False
        stored = self.load(name)
        if not isinstance(stored, Projection) or (stored.d, stored.linear.p) != (linear.d, linear.p):
            return False
        return np.array_equal(signs_of(stored.linear), signs_of(linear))

    def _array(self, sql: str, name: str, width: int) -> np.ndarray:
        rows = self.backend.fetchall(sql, [name])
        return np.array(rows, dtype=np.float64).reshape(-1, width)

    def list(self) -> pd.DataFrame:
        """One row per stored projection: name, method, d, k, nnz, seed, created_at."""
        rows = self.backend.fetchall(
            "SELECT p.name, p.method, p.d, p.k, "
            "(SELECT count(*) FROM sqlrp_linear_entry e WHERE e.projection = p.name) AS nnz, "
            "p.seed, p.params, p.created_at FROM sqlrp_projection p ORDER BY p.name"
        )
        frame = pd.DataFrame(rows, columns=["name", "method", "d", "k", "nnz", "seed", "params", "created_at"])
        frame["params"] = [v if isinstance(v, str) else json.dumps(v) for v in frame["params"]]
        return frame

    def drop(self, name: str) -> None:
        """Delete the stored projection ``name`` and all its rows."""
        with self.backend.transaction():
            if not self.exists(name):
                raise ProjectionNotFound(f"no stored projection named {name!r}")
            self._delete(name)

    def _delete(self, name: str) -> None:
        rows = self.backend.fetchall("SELECT params FROM sqlrp_projection WHERE name = ?", [name])
        if rows:
            params = rows[0][0] if isinstance(rows[0][0], dict) else json.loads(rows[0][0])
            for stage in params.get(STAGES_KEY, []):
                self._delete(stage)
        for table in OWNED_TABLES:
            self.backend.execute(f"DELETE FROM {table} WHERE projection = ?", [name])
        self.backend.execute("DELETE FROM sqlrp_projection WHERE name = ?", [name])


def _positions(factor_term: np.ndarray) -> np.ndarray:
    """Position of each factor within its term, in stored order."""
    pos = np.zeros(len(factor_term), dtype=np.int32)
    seen: dict[int, int] = {}
    for i, t in enumerate(factor_term.tolist()):
        pos[i] = seen.get(t, 0)
        seen[t] = pos[i] + 1
    return pos


def _budget_key(linear: LinearStage, dialect: SqlrpDialect | str) -> int:
    """The key a pairs plan is stored under: the dialect's partials budget (-1: no column limit)."""
    budget = pairs_budget(linear, get_dialect(dialect))
    return -1 if budget is None else int(budget)


def _plan_rows(plan: PairsPlan, name: str, budget: int) -> dict[str, object]:
    """One row per signed column read by a partial (node ``q``) or an output (node ``-1 - v``)."""
    nodes, levels, reads, signs = [], [], [], []
    for q, (cols, sgn) in enumerate(plan.partials):
        nodes.append(np.full(len(cols), q))
        levels.append(np.full(len(cols), plan.level[q]))
        reads.append(cols)
        signs.append(sgn)
    for v, (cols, sgn) in enumerate(plan.terms):
        nodes.append(np.full(len(cols), -1 - v))
        levels.append(np.zeros(len(cols)))
        reads.append(cols)
        signs.append(sgn)
    return {
        "projection": name,
        "budget": budget,
        "node": np.concatenate(nodes).astype(np.int32),
        "level": np.concatenate(levels).astype(np.int32),
        "reads": np.concatenate(reads).astype(np.int32),
        "sign": np.concatenate(signs).astype(np.int16),
    }


def _plan_from_rows(rows: np.ndarray, d: int, p: int) -> PairsPlan:
    """:func:`_plan_rows` read back: ``rows`` of (node, level, reads, sign) sorted by node."""
    node, level, reads, sign = rows.T
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
    stops = np.r_[starts[1:], len(node)]
    partials: list[tuple[np.ndarray, np.ndarray]] = []
    levels: list[int] = []
    terms: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0, np.int64), np.zeros(0)) for _ in range(p)]
    for a, b in zip(starts, stops, strict=True):
        entry = (reads[a:b].copy(), sign[a:b].astype(np.float64))
        if node[a] >= 0:
            partials.append(entry)
            levels.append(int(level[a]))
        else:
            terms[-1 - int(node[a])] = entry
    return PairsPlan(d, partials, np.array(levels, dtype=np.int64), terms)
