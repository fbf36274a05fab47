"""Stored projections, pairs plans and indexes: the registry's tables defined once (:mod:`.schema`),
read and written through a backend (:mod:`.store`), exported to and imported from files
(:mod:`.transfer`)."""
