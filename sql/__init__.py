"""Static SQL users may read or reuse (installed as ``sqlrp.sql``)."""
