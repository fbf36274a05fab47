"""The registry's tables as SQL, one folder per dialect (installed as ``sqlrp.migrations``): the
rendering of :mod:`sqlrp.registry.schema` written out for a DBA to read -- ``bootstrap.sql`` (the
version table) and one file per registry version.  sqlrp renders the same statements itself when it
migrates a database; ``python -m migrations`` rewrites these files and
``tests/io/test_registry_schema.py`` fails when one differs from the rendering."""
