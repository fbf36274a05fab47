"""The bottom layer, imported by every other and importing nothing of sqlrp above it: the projection
format (:mod:`.ir`), the errors (:mod:`.errors`), SQL-expression helpers (:mod:`.nodes`), the input
and output specs (:mod:`.layout`), file formats (:mod:`.files`) and the lazy pandas import
(:mod:`.lazy`)."""
