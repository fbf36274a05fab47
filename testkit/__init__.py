"""Helpers shared by the tests (``tests/``) and the benchmarks (``bench/``); not part of sqlrp.

Used from a checkout, never installed (``pyproject.toml`` packages ``sqlrp`` only): pytest finds it
through ``pythonpath = ["."]``, the benchmarks through ``PYTHONPATH=. python bench/...``.

- :mod:`testkit.pgserver`: a throw-away PostgreSQL server (``TempPostgres``)
- :mod:`testkit.sparkcluster`: a throw-away Spark standalone cluster and Spark Connect server
- :mod:`testkit.frames`: DataFrames of a matrix (wide, long, array) and the parity check against NumPy
- :mod:`testkit.engine_cases`: the cross-engine matrix every ``tests/engines/test_engine_*.py`` runs,
  and the registries of earlier releases (``registry_v4/``, hand-written SQL, never edited)
- :mod:`testkit.search_cases`: the similarity-search tests' tables and NumPy oracle
- :mod:`testkit.fuzz_tables`, :mod:`testkit.fuzz_ops`, :mod:`testkit.fuzz_oracle`: the differential
  fuzzer's tables, operations and oracle (``tests/fuzz/``; ``docs/tests.md``)
"""
