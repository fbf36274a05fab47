"""One-off measurements (``PYTHONPATH=. python -m bench.probes NAME``; the list: ``__main__.py``)."""
