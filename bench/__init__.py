"""Benchmarks (``PYTHONPATH=. python bench/run.py --smoke`` / ``PYTHONPATH=. python bench/run.py``, from the
repository's root, which holds ``testkit/``); not part of the package."""
