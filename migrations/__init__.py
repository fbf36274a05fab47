"""Versioned registry migrations, one folder per dialect (installed as ``sqlrp.migrations``)."""
