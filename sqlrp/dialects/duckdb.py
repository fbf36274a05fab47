"""DuckDB: the embedded default.  LIST / ARRAY subscripts are cheap (``x[i]``, 1-based).

Limits: none that sqlrp's statements reach (no documented cap on columns or statement size; the
largest plan measured, d = 784, k = 200, s = 1 inline, is 1.6 MB and 156,800 additions).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB

from .base import SqlrpDialect, extend


class DuckDBDialect(SqlrpDialect):
    name = "duckdb"
    cos_function = "cos"  # DuckDB "Numeric Functions": cos(x)
    sqlglot = extend(DuckDB)
    star_exclude = True
    # ---- what varies between engines (dialects/portable.py), stated with its source ----
    # lists are 1-based: list_extract / x[i] "using a 1-based index" (https://duckdb.org/docs/stable/sql/functions/list)
    array_base = 1
    # 1.6e-16 is a DOUBLE ("scientific notation", https://duckdb.org/docs/stable/sql/data_types/literal_types)
    exponent_literals = True
    # no fence: the base's (DuckDB computes a sub-query's columns once; tests/projection/test_strategies.py)
    nan_propagating_sums = True
    nested_plans = True  # pairs measured faster than inline (bench/run.py; docs/benchmarks.md, "Dialects")
    # "multiple unnests of lists of the same length are unnested side by side"
    # (https://duckdb.org/docs/stable/sql/query_syntax/unnest)
    select_unnest = True
    float32 = True  # FLOAT is FLOAT4 (https://duckdb.org/docs/stable/sql/data_types/numeric)
    # min_by(arg, val, n) returns the n args of smallest val as a list, in order
    # (https://duckdb.org/docs/stable/sql/functions/aggregates): exact k-NN keeps K rows per query
    # rather than numbering every pair; close to the fastest hand-written form
    # (PYTHONPATH=. python -m bench.probes search-exact)
    min_by_n = True
    # small wide tables: unnested and looked up beats inline's binding (python -m bench.probes small)
    wide_as_long = True
    # list_transform with a lambda, list_select, list_sum, list_dot_product
    # (https://duckdb.org/docs/stable/sql/functions/list, https://duckdb.org/docs/stable/sql/functions/lambda):
    # the list_transform strategy for small tables (compiler/lists.py)
    list_lambdas = True
    # quoted names match ignoring ASCII case ("Out" is "out"; "É" is not "é"), measured on DuckDB 2.0;
    # https://duckdb.org/docs/stable/sql/dialect/keywords_and_identifiers: resolution is case-insensitive
    quoted_case_fold = "ascii"
    executes = True
    # HUGEINT code words: bit_count and & take them (https://duckdb.org/docs/stable/sql/functions/numeric);
    # 2 words a row for 256 bits instead of 4: a faster join and estimate (a throw-away probe;
    # docs/benchmarks.md, "Dialects")
    code_word_bits = 128

    def raise_in_query(self, message: exp.Expression) -> exp.Expression | None:
        # error(message) "throws the given error message" (https://duckdb.org/docs/stable/sql/functions/utility);
        # in a CASE arm it runs only for the rows that take it
        return exp.Anonymous(this="error", expressions=[message])

    def popcount(self, word: exp.Expression) -> exp.Expression:
        # bit_count() on BIGINT (https://duckdb.org/docs/stable/sql/functions/numeric); it returns
        # TINYINT, cast so that sums over words cannot overflow
        return exp.cast(exp.Anonymous(this="BIT_COUNT", expressions=[word]), exp.DataType.build("INT"))

    def popcount_sum(self, words: list[exp.Expression]) -> exp.Expression:
        # one cast for the sum: INT + TINYINT is an INT (1,000 queries x 32.7M code estimates)
        counts = [exp.Anonymous(this="BIT_COUNT", expressions=[w]) for w in words]
        total: exp.Expression = exp.cast(counts[0], exp.DataType.build("INT"))
        for count in counts[1:]:
            total = exp.Add(this=total, expression=count)
        return exp.Paren(this=total)

    def vector(self, features: list[exp.Expression]) -> exp.Expression:
        # a DOUBLE[d] ARRAY and array_distance: a sum over the columns is slower (DESIGN.md 4c)
        array = exp.Anonymous(this="list_value", expressions=features)
        return exp.cast(array, exp.DataType.build(f"DOUBLE[{len(features)}]", dialect="duckdb"))

    def whole_vector(self, array: exp.Expression, d: int) -> exp.Expression | None:
        # a LIST or FLOAT[d] column cast to DOUBLE[d] at once: the same doubles as element by element
        # (a float widens exactly), one vectorised cast instead of d subscripts, casts and a list_value
        return exp.cast(array, exp.DataType.build(f"DOUBLE[{d}]", dialect="duckdb"))

    def vector_distance(self, a: exp.Expression, b: exp.Expression) -> exp.Expression:
        return exp.Anonymous(this="array_distance", expressions=[a, b])

    def row_hash(self, values: list[exp.Expression]) -> exp.Expression:
        # hash(v1, v2, ...) -> UBIGINT; sum() of UBIGINT is a HUGEINT, so a table's sum cannot
        # overflow (https://duckdb.org/docs/stable/sql/functions/utility)
        return exp.Anonymous(this="hash", expressions=values)
