"""The registry of stored projections: versioned migrations, save, load, list, drop.

Once stored, the tables are the source of truth for a projection; the seed only made it repeatable.
The tables are defined once, in :mod:`sqlrp.registry.schema`, and rendered for the database's
dialect; each registry version is applied in order, in its own transaction, and recorded in
``sqlrp_schema_version`` under its file name (``0001_registry.sql`` ...: the rendered record in
``migrations/<dialect>/``); re-running them is a no-op.  An engine on which sqlrp keeps no registry
refuses with :class:`~sqlrp.core.errors.EngineLimit`, naming what to do instead.

A stored projection's rows are read back by :mod:`sqlrp.registry.rows`, a registry changed outside
sqlrp is repaired by :mod:`sqlrp.registry.recovery`, and ``pairs`` plans are stored as rows by
:mod:`sqlrp.registry.pairs`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import numpy as np

from ..backends import Backend
from ..core.errors import (
    InputError,
    InvalidParameter,
    ProjectionExists,
    ProjectionNotFound,
    SqlrpError,
    cli_words,
    refuse_nul,
)
from ..core.ir import Composed, LinearStage, Projection
from ..core.lazy import pd
from ..core.pairs_plan import PairsPlan, signs_of
from ..dialects import SqlrpDialect
from .pairs import budget_key, plan_from_rows, plan_rows
from .recovery import recorded_again, undone_on_failure, write_digest
from .rows import as_int, fix_hint, parse_params, read_parts, same_digest
from .schema import LATEST, OWNED_TABLES, VERSIONS, bootstrap, statements
from .schema import REGISTRY_TABLES as REGISTRY_TABLES  # every table the registry owns: never an output
from .schema import VERSION_TABLE as _VERSION_TABLE
from .schema import migration_files as migration_files  # (version, file name, SQL) per registry version
from .validate import STAGES_KEY as STAGES_KEY  # a composition's stage names, in its params
from .validate import StoredProjectionChanged, assemble, composed_digest, digest, digest_of, validate
from .validate import stage_names as stage_names  # where a composition's stages are stored

VERSION_TABLE = _VERSION_TABLE.name
DIGEST_VERSION = 5  # the registry version that added sqlrp_projection.digest (filled in by the upgrade)


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
        with undone_on_failure(self.backend), self.backend.transaction():
            self.backend.lock("sqlrp migrations")
            current = self.version() or recorded_again(self.backend)
            # an engine that adds no columns to a table gets a new registry at its latest shape at once
            latest = LATEST if current == 0 and not self.backend.adds_columns else None
            for version in VERSIONS:
                if version.number <= current:
                    continue
                with self.backend.transaction():
                    for statement in statements(version, self.backend.dialect, latest):
                        self.backend.execute(statement)
                    if version.number == DIGEST_VERSION:
                        self._fill_digests()
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
        validate(projection, f"projection {name!r}", stored=True)  # nothing unsound is stored (sqlrp.registry.validate)
        if isinstance(projection, Composed):
            return self._save_composed(projection, name, replace)
        lin, comb = projection.linear, projection.combiner
        params = _params_json(projection.params, name)
        with self._atomic(name):
            self._make_room(name, replace)
            self.backend.execute(
                "INSERT INTO sqlrp_projection (name, method, params, d, k, p, seed, scale, digest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    name,
                    projection.method,
                    params,
                    projection.d,
                    projection.k,
                    lin.p,
                    projection.seed,
                    float(projection.scale),
                    digest(projection, json.loads(params)),
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
            params = json.loads(_params_json({**composed.params, STAGES_KEY: names}, name))
            self.backend.execute(
                "INSERT INTO sqlrp_projection (name, method, params, d, k, p, seed, scale, digest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    name,
                    composed.method,
                    json.dumps(params),
                    composed.d,
                    composed.k,
                    0,
                    composed.seed,
                    1.0,
                    digest_of(composed, params),
                ],
            )
        composed.name = name
        return composed

    def load(self, name: str) -> Projection | Composed:
        """The stored projection ``name``, rebuilt from its rows, checked by the one validator
        (:func:`sqlrp.registry.validate.assemble`) and against the digest stored with it: a projection
        edited outside sqlrp is refused (:class:`~sqlrp.registry.validate.StoredProjectionChanged`)."""
        return self._load(name)[0]

    def _load(self, name: str, check: bool = True) -> tuple[Projection | Composed, str]:
        """``(projection, its digest as computed from the rows)``; ``check``: compare that with the
        stored digest (off only to compute it: the upgrade to version 5, :meth:`accept`)."""
        refuse_nul(name, "projection name")
        where = f"stored projection {name!r}"
        rows = self.backend.fetchall(
            "SELECT method, params, d, k, p, seed, scale, digest FROM sqlrp_projection WHERE name = ?", [name]
        )
        if not rows:
            known = [r[0] for r in self.backend.fetchall("SELECT name FROM sqlrp_projection ORDER BY name")]
            hint = f" Stored: {', '.join(known[:20])}" if known else " No projections are stored here yet."
            raise ProjectionNotFound(f"no stored projection named {name!r}.{hint}")
        if len(rows) > 1:  # engines without keys (Spark, ClickHouse) let an edit write a second row
            raise InputError(
                f"{where}: not a valid projection (it has {len(rows)} rows in sqlrp_projection){fix_hint(name)}"
            )
        method, params, d, k, p, seed, scale, stored = rows[0]
        params = parse_params(params, where, name)
        if STAGES_KEY in params:
            projection, computed = self._load_composed(name, method, params, d, k, seed, check)
        else:
            try:
                projection = assemble(read_parts(self.backend, name, params, (method, d, k, p, seed, scale)), where)
            except InputError as exc:
                raise InputError(f"{cli_words(exc)}{fix_hint(name)}") from None
            computed = digest(projection)
        if check:
            same_digest(name, stored, computed)
        return projection, computed

    def _load_composed(
        self, name: str, method: object, params: dict, d: object, k: object, seed: object, check: bool
    ) -> tuple[Composed, str]:
        """A stored composition: its two stages (each loaded and checked), then its own row."""
        where = f"stored projection {name!r}"
        stages = params[STAGES_KEY]
        if not (isinstance(stages, list) and len(stages) == 2 and all(isinstance(s, str) for s in stages)):
            raise InputError(f"{where}: not a valid projection (its stages are not two names){fix_hint(name)}")
        try:
            loaded = [self._load(stage, check) for stage in stages]
        except SqlrpError as exc:  # named as the composition asked for, then its stage
            raise type(exc)(f"composition {name!r}: {cli_words(exc)}") from None
        first, second = (stage for stage, _ in loaded)
        try:
            composed = Composed(
                first=first,
                second=second,
                method=str(method),
                params={key: v for key, v in params.items() if key != STAGES_KEY},
                seed=as_int(seed),
                name=name,
            )
        except ValueError as exc:
            raise InputError(f"{where}: not a valid projection ({exc}){fix_hint(name)}") from None
        computed = composed_digest(str(method), as_int(d), as_int(k), as_int(seed), params, [dg for _, dg in loaded])
        return composed, computed

    def accept(self, name: str) -> Projection | Composed:
        """Accept the stored projection ``name`` as its rows now hold it (edited outside sqlrp, or
        stored by a release before registry version 5): its digest is computed from the rows and
        written.  The rows must still make a sound projection (the validator's checks); a composition's
        stages are accepted with it."""
        refuse_nul(name, "projection name")
        with self.backend.transaction():
            projection, computed = self._load(name, check=False)
            if isinstance(projection, Composed):
                for stage in projection.stages:
                    self.accept(stage.name)
            write_digest(self.backend, name, computed)
        return projection

    def verify(self, projection: Projection | Composed) -> None:
        """Refuse, before SQL that joins the registry's rows of ``projection.name`` runs, a registry
        whose rows are not ``projection``: edited since they were stored (the digest), or another
        projection of the same name.  (``matrix="registry"``: :func:`sqlrp.pipeline.plan.decide`.)"""
        name = projection.name
        if not name:
            return
        stored = self._load(name)[1]
        if digest_of(projection) != stored:
            raise StoredProjectionChanged(
                f"stored projection {name!r} is not the projection given under that name (another matrix, scale, "
                "combiner or parameters): the SQL would join the stored rows; project with the stored one (pass "
                "its name), or store the one given under another name"
            )

    def _fill_digests(self) -> None:
        """The upgrade to registry version 5: the digest of every projection stored before it, computed
        from its rows as they are (one the validator refuses is left without one: it stays refused)."""
        names = [r[0] for r in self.backend.fetchall("SELECT name FROM sqlrp_projection WHERE digest IS NULL")]
        for name in names:
            try:
                computed = self._load(name, check=False)[1]
            except SqlrpError:
                continue
            write_digest(self.backend, name, computed)

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
            [name, budget_key(lin, dialect)],
        )
        stored = plan_from_rows(np.array(rows, dtype=np.int64), lin.d, lin.p) if rows else None
        return stored if stored is not None and stored.computes(lin) else None

    def save_pairs(self, projection: Projection, dialect: SqlrpDialect | str, plan: PairsPlan) -> bool:
        """Store a complete ``plan`` beside ``projection`` (replacing a stale one), in one transaction, so
        that later processes skip planning; only where this registry holds ``projection`` under its name
        with the same sign matrix.  Returns whether it was stored."""
        name, lin = projection.name, projection.linear
        if not name or not plan.complete or not self._holds(name, lin):
            return False
        key = budget_key(lin, dialect)
        with self.backend.transaction():
            self.backend.execute("DELETE FROM sqlrp_pairs_entry WHERE projection = ? AND budget = ?", [name, key])
            self.backend.insert_columns("sqlrp_pairs_entry", plan_rows(plan, name, key))
        return True

    def _holds(self, name: str, linear: LinearStage) -> bool:
        """True if ``name`` is stored here with the same sign matrix as ``linear``."""
        if not self.exists(name):
            return False
        stored = self.load(name)
        if not isinstance(stored, Projection) or (stored.d, stored.linear.p) != (linear.d, linear.p):
            return False
        return np.array_equal(signs_of(stored.linear), signs_of(linear))

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


def _params_json(params: dict, name: str) -> str:
    """``params`` as the JSON text stored, or :class:`InvalidParameter` for a value JSON cannot hold."""
    try:
        return json.dumps(params)
    except (TypeError, ValueError) as exc:
        raise InvalidParameter(f"projection {name!r}: its params cannot be stored as JSON ({exc})") from None


def _positions(factor_term: np.ndarray) -> np.ndarray:
    """Position of each factor within its term, in stored order."""
    pos = np.zeros(len(factor_term), dtype=np.int32)
    seen: dict[int, int] = {}
    for i, t in enumerate(factor_term.tolist()):
        pos[i] = seen.get(t, 0)
        seen[t] = pos[i] + 1
    return pos
