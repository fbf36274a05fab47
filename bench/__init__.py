"""Benchmarks (``python bench/run.py --smoke`` / ``python bench/run.py``); not part of the package."""
