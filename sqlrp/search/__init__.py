"""Similarity search inside the database: inverted lists (:mod:`.ivf`), the random rotation
(:mod:`.rotation`), an index stored in tables (:mod:`.index`), the search SQL (:mod:`.query`) and
recall measured against exact search (:mod:`.evaluate`).

``sqlrp.search`` is the search function (:func:`sqlrp.search.lookup.search`), not this package."""
