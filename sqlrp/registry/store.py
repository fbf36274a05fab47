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
from ..dialects import SqlrpDialect, get_dialect
from .schema import LATEST, OWNED_TABLES, TABLES, VERSIONS, bootstrap, statements
from .schema import REGISTRY_TABLES as REGISTRY_TABLES  # every table the registry owns: never an output
from .schema import VERSION_TABLE as _VERSION_TABLE
from .schema import migration_files as migration_files  # (version, file name, SQL) per registry version
from .validate import STAGES_KEY as STAGES_KEY  # a composition's stage names, in its params
from .validate import Parts, StoredProjectionChanged, assemble, composed_digest, digest, digest_of, validate
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
        with self.backend.transaction():
            self.backend.lock("sqlrp migrations")
            current = self.version() or self._recorded_again()
            for version in VERSIONS:
                if version.number <= current:
                    continue
                with self.backend.transaction():
                    for statement in statements(version, self.backend.dialect):
                        self.backend.execute(statement)
                    if version.number == DIGEST_VERSION:
                        self._fill_digests()
                    self.backend.execute(
                        f"INSERT INTO {VERSION_TABLE} (version, name) VALUES (?, ?)", [version.number, version.file]
                    )
                applied.append(version.file)
        return applied

    def _recorded_again(self) -> int:
        """A registry whose version table is empty (dropped, or emptied) while its tables are there: the
        versions whose tables and columns all exist are recorded again (their statements would fail on
        what exists: "sqlrp_projection already exists"), and the last of them returned; 0 for a new
        database.  A version whose tables are there only in part is refused in one line."""
        present = {t for t in REGISTRY_TABLES if t != VERSION_TABLE and self.backend.table_exists(t)}
        if not present:
            return 0
        found = 0
        for version in VERSIONS:
            tables = [t for t in TABLES if t.since == version.number]
            added = [
                (t, c) for t in TABLES for c in t.columns if c.since == version.number and t.since < version.number
            ]
            have = [t.name in present for t in tables]
            have += [t.name in present and c.name in {i.name for i in self.backend.columns(t.name)} for t, c in added]
            if all(have) and found == version.number - 1:
                found = version.number
            elif any(have):
                raise InputError(
                    f"the registry's version table {VERSION_TABLE} is gone and its tables are there only in part "
                    f"(up to version {found}, then some of version {version.number}): restore the database from a "
                    "backup, or move the sqlrp_* tables away and store the projections again"
                )
        for version in VERSIONS[:found]:
            self.backend.execute(
                f"INSERT INTO {VERSION_TABLE} (version, name) VALUES (?, ?)", [version.number, version.file]
            )
        return found

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
                f"{where}: not a valid projection (it has {len(rows)} rows in sqlrp_projection){_fix(name)}"
            )
        method, params, d, k, p, seed, scale, stored = rows[0]
        params = _params(params, where, name)
        if STAGES_KEY in params:
            projection, computed = self._load_composed(name, method, params, d, k, seed, check)
        else:
            try:
                projection = assemble(self._parts(name, method, params, d, k, p, seed, scale), where)
            except InputError as exc:
                raise InputError(f"{cli_words(exc)}{_fix(name)}") from None
            computed = digest(projection)
        if check:
            _same_digest(name, stored, computed)
        return projection, computed

    def _parts(
        self, name: str, method: object, params: dict, d: object, k: object, p: object, seed: object, scale: object
    ) -> Parts:
        """The rows of the stored projection ``name`` as :class:`~sqlrp.registry.validate.Parts`."""
        where = f"stored projection {name!r}"
        entries = self._array(
            "SELECT vector, feature, weight FROM sqlrp_linear_entry WHERE projection = ? ORDER BY vector, feature",
            name,
            3,
            where,
        )
        vectors = self._array(
            "SELECT vector, bias, power FROM sqlrp_linear_vector WHERE projection = ? ORDER BY vector", name, 3, where
        )
        terms = self._array(
            "SELECT term, component, weight FROM sqlrp_combiner_term WHERE projection = ? ORDER BY term",
            name,
            3,
            where,
        )
        factors = self._array(
            "SELECT term, position, vector FROM sqlrp_combiner_factor WHERE projection = ? ORDER BY term, position",
            name,
            3,
            where,
        )
        bias = power = None
        if len(vectors):
            try:
                count = _int(p)
                index = vectors[:, 0]
                if (
                    not isinstance(count, int)
                    or count < 0
                    or not np.all(np.isfinite(index))
                    or np.any(index != np.round(index))
                ):
                    raise ValueError
                if index.min() < 0 or index.max() >= count or len(np.unique(index)) != len(index):
                    raise ValueError
            except ValueError:
                raise InputError(
                    f"{where}: not a valid projection (sqlrp_linear_vector holds a vector outside [0, p = {p}) or "
                    f"one twice){_fix(name)}"
                ) from None
            bias, power = np.zeros(count), np.ones(count)
            bias[index.astype(np.int64)] = vectors[:, 1]
            power[index.astype(np.int64)] = vectors[:, 2]
            bias = bias if np.any(bias != 0) or not np.all(np.isfinite(bias)) else None
            power = power if np.any(power != 1) else None
        return Parts(
            method=method,
            d=_int(d),
            k=_int(k),
            p=_int(p),
            scale=scale,
            vector=entries[:, 0],
            feature=entries[:, 1],
            weight=entries[:, 2],
            params=params,
            seed=_int(seed),
            name=name,
            bias=bias,
            power=power,
            combiner={
                "term_component": terms[:, 1],
                "term_weight": terms[:, 2],
                "factor_term": factors[:, 0],
                "factor_vector": factors[:, 2],
            },
            term_ids=terms[:, 0],
        )

    def _load_composed(
        self, name: str, method: object, params: dict, d: object, k: object, seed: object, check: bool
    ) -> tuple[Composed, str]:
        """A stored composition: its two stages (each loaded and checked), then its own row."""
        where = f"stored projection {name!r}"
        stages = params[STAGES_KEY]
        if not (isinstance(stages, list) and len(stages) == 2 and all(isinstance(s, str) for s in stages)):
            raise InputError(f"{where}: not a valid projection (its stages are not two names){_fix(name)}")
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
                seed=_int(seed),
                name=name,
            )
        except ValueError as exc:
            raise InputError(f"{where}: not a valid projection ({exc}){_fix(name)}") from None
        computed = composed_digest(str(method), _int(d), _int(k), _int(seed), params, [dg for _, dg in loaded])
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
            self._write_digest(name, computed)
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

    def _write_digest(self, name: str, value: str) -> None:
        """Write ``value`` as ``name``'s digest: the row read, deleted and inserted again (no UPDATE:
        Spark's file tables and ClickHouse have none that is portable)."""
        columns = "name, method, params, d, k, p, seed, scale, created_at"
        row = self.backend.fetchall(f"SELECT {columns} FROM sqlrp_projection WHERE name = ?", [name])[0]
        values = list(row)
        if not isinstance(values[2], str):
            values[2] = json.dumps(values[2])
        self.backend.execute("DELETE FROM sqlrp_projection WHERE name = ?", [name])
        try:
            self.backend.execute(
                f"INSERT INTO sqlrp_projection ({columns}, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [*values, value],
            )
        except Exception:  # noqa: BLE001 - a driver that cannot bind the timestamp it returned
            if self.backend.transactional:
                raise  # the transaction rolls the delete back
            # no transaction (Spark, ClickHouse): the row written again, its creation time now
            self.backend.execute(
                f"INSERT INTO sqlrp_projection ({columns[: -len(', created_at')]}, digest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [*values[:-1], value],
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
            self._write_digest(name, computed)

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

    def _array(self, sql: str, name: str, width: int, where: str = "") -> np.ndarray:
        rows = self.backend.fetchall(sql, [name])
        try:
            return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float64).reshape(
                -1, width
            )
        except (TypeError, ValueError, OverflowError):
            raise InputError(
                f"{where or repr(name)}: not a valid projection (its rows hold values that are not numbers){_fix(name)}"
            ) from None

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


def _int(value: object) -> object:
    """A count or seed as read: a NumPy or driver integer as ``int``; anything else as it is (for the
    validator to refuse)."""
    return int(value) if isinstance(value, (np.integer, int)) and not isinstance(value, bool) else value


def _fix(name: str) -> str:
    """What to do about a stored projection that is not sound, said after its error."""
    return f"; re-create it with --replace, or drop it (sqlrp projections drop {name!r})"


def _params(raw: object, where: str, name: str) -> dict:
    """The stored parameters (JSON text, or a dict where the driver parses JSON) as a dict."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise InputError(f"{where}: not a valid projection (its params are not valid JSON){_fix(name)}") from None
    if not isinstance(raw, dict):
        raise InputError(
            f"{where}: not a valid projection (its params must be a JSON object, got {type(raw).__name__}){_fix(name)}"
        )
    return raw


def _params_json(params: dict, name: str) -> str:
    """``params`` as the JSON text stored, or :class:`InvalidParameter` for a value JSON cannot hold."""
    try:
        return json.dumps(params)
    except (TypeError, ValueError) as exc:
        raise InvalidParameter(f"projection {name!r}: its params cannot be stored as JSON ({exc})") from None


def _same_digest(name: str, stored: object, computed: str) -> None:
    """Refuse a stored projection whose rows no longer give the digest stored with them."""
    accept = f"accept it (sqlrp projections accept {name!r}, accept_projection)"
    if stored is None:
        raise StoredProjectionChanged(
            f"stored projection {name!r} has no digest (stored before registry version 5 and not upgraded, or "
            f"edited outside sqlrp): if its rows are as meant, {accept}; else re-create it with --replace"
        )
    if stored != computed:
        raise StoredProjectionChanged(
            f"stored projection {name!r} was changed outside sqlrp: its matrix, scale, combiner or parameters no "
            f"longer match the digest stored with it; re-create it with --replace, or, if the edit was meant, "
            f"{accept}"
        )


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
