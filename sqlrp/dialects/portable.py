"""The portable core: what sqlrp renders for an engine it does not execute (issue 32).

The SQL of ``sqlrp compile --dialect X`` for a warehouse sqlrp never reaches (Snowflake, BigQuery,
Trino, Redshift, Databricks, any sqlglot dialect) may use only constructs whose meaning does not vary
between engines.  Measured on Tableau Hyper, Daft and two more engines with the SQL rendered for
PostgreSQL, DuckDB and Trino (``../shared/DESIGN.md`` 4d), these vary, and are refused here before
anything is rendered, each with the way out:

- **array subscripts** (the array layout, array output, sums travelling as one array): 1-based in
  PostgreSQL and DuckDB, 0-based in Spark and Daft -- a wrong base reads the next element or NULL;
- **two UNNESTs in one select list** (``join`` / ``lookup`` on a wide table): in lockstep in
  PostgreSQL and DuckDB, a cross product in Hyper (sums 36x off);
- **``VALUES`` as a relation** (the long layout's inlined matrix): Daft has none, unless the profile
  says the engine has it (:attr:`SqlrpDialect.values_relation`);
- **a fence** ``OFFSET <expression>``: Hyper and Daft want a literal (the generic profile has none).

and these are rewritten, the meaning kept:

- a number literal with an exponent (``1.6e-16``: a standardised mean) is written as a plain decimal
  (``0.00000000000000016``) -- exponent literals are refused by a PostgreSQL-compatible engine; one
  that would need more than 38 digits (the largest double, in the infinity check) is cast from text;
- ``COALESCE(<double>, 0)`` gets a DOUBLE zero (``COALESCE(x, CAST(0 AS DOUBLE))``): one engine
  refuses to unify a double with an integer;
- ``IF(c, a, b)`` is ``CASE WHEN c THEN a ELSE b END`` (sqlglot writes Snowflake's ``IFF``);
- an aggregate's ``FILTER (WHERE c)`` is ``SUM(CASE WHEN c THEN x END)``: GlareDB parses ``FILTER`` and
  ignores it (the long layout rendered for Trino summed every vector into every output: 2.2x off).

What is left -- the wide layout as column arithmetic, ``CAST(<decimal> AS DOUBLE)``, ``SUM``,
``CASE``, ``GROUP BY``, joins -- ran exactly on all four engines.  A profile of an engine sqlrp
executes (``executes = True``, tested against NumPy) states its own array base, unnest pairing,
literal syntax and fence, and is rendered without these restrictions; ``sqlrp compile --check``
proves a rendering on the engine itself (:mod:`.selfcheck`).
"""

from __future__ import annotations

from decimal import Decimal

from sqlglot import exp

from ..core.errors import EngineLimit
from ..core.layout import Output, Source

#: most digits a plain decimal literal may have (DECIMAL(38) in Snowflake, BigQuery's BIGNUMERIC
#: aside, SQL Server, Trino, Spark); a number that needs more is refused rather than rounded
MAX_DECIMAL_DIGITS = 38

WAYS_OUT = (
    "or render for an engine with an executed profile (--dialect: duckdb, postgres, sqlite, clickhouse, "
    "datafusion, spark, hyper) and prove it there (--check)"
)


def plain_decimal(text: str) -> str:
    """The number literal ``text`` without an exponent, exactly (``1.6e-16`` -> ``0.00000000000000016``);
    :class:`EngineLimit` if that takes more than :data:`MAX_DECIMAL_DIGITS` digits."""
    if "e" not in text.lower():
        return text
    value = Decimal(text)
    if not value.is_finite():
        raise EngineLimit(f"the number {text} has no plain decimal form")
    plain = format(value, "f")
    if len(plain.lstrip("-").replace(".", "")) > MAX_DECIMAL_DIGITS:
        raise EngineLimit(
            f"the number {text} needs more than {MAX_DECIMAL_DIGITS} digits as a plain decimal, and an exponent "
            "literal is read differently between engines"
        )
    return plain


def rewrite(tree: exp.Expression, spellings: bool = True) -> exp.Expression:
    """``tree`` with plain decimal literals and, with ``spellings``, the other portable spellings
    (module docstring): DOUBLE zeros in ``COALESCE``, ``CASE`` for ``IF``.  Changes ``tree`` in place."""
    for node in list(tree.find_all(exp.Literal, exp.Coalesce, exp.If) if spellings else tree.find_all(exp.Literal)):
        if isinstance(node, exp.Literal):
            if node.is_number:
                try:
                    node.set("this", plain_decimal(node.this))
                except EngineLimit:
                    if not isinstance(node.parent, exp.Cast):
                        raise
                    node.replace(exp.Literal.string(node.this))  # CAST('1.7976931348623157e308' AS DOUBLE)
        elif isinstance(node, exp.Coalesce):
            for arg in list(node.expressions):
                if isinstance(arg, exp.Literal) and arg.is_int:
                    arg.replace(exp.Cast(this=arg.copy(), to=exp.DataType(this=exp.DataType.Type.DOUBLE)))
        elif isinstance(node.parent, exp.Case) and node.arg_key == "ifs":
            continue  # a CASE's own WHEN ... THEN
        else:
            case = exp.Case(ifs=[exp.If(this=node.this, true=node.args.get("true"))], default=node.args.get("false"))
            node.replace(case)
    return tree


def check(dialect_name: str, source: Source, output: Output, strategy: str, matrix: str, values: bool) -> None:
    """Refuse, before rendering, what the portable core does not render (module docstring), naming
    the construct and the way out.  ``strategy``: the one chosen; ``values``: the profile says the
    engine has ``VALUES`` as a relation."""

    def refuse(what: str, instead: str) -> EngineLimit:
        return EngineLimit(
            f"{dialect_name}: sqlrp does not execute this engine, so it renders only constructs whose meaning "
            f"does not vary between engines; {what}: {instead}, {WAYS_OUT}"
        )

    if source.layout == "array":
        raise refuse(
            "the array layout reads elements by subscript, and the first element is x[1] in some engines, "
            "x[0] in others",
            "unpack the array into columns and use --layout=wide",
        )
    if output.form == "array":
        raise refuse("array output builds and is read by array subscripts", "use --output=wide")
    if source.layout != "long" and strategy in ("join", "lookup"):
        raise refuse(
            f"the {strategy} strategy on a wide table unnests two arrays in one select list, in lockstep in "
            "PostgreSQL and DuckDB but a cross product elsewhere",
            "use the inline, pairs or mailman strategy (--strategy)",
        )
    if strategy == "lookup":
        raise refuse("the lookup strategy reads arrays by position", "use --strategy=join")
    if source.layout == "long" and matrix == "values" and not values:
        raise refuse(
            "the long layout's inlined matrix is a VALUES relation, which not every engine has",
            "load the exported matrix (projections export) as a table and give --matrix=TABLE",
        )
