"""Griffe extension: the Sphinx roles of sqlrp's docstrings (``:func:`x```, ``:mod:`x``` ...) as Markdown
code spans, so that the API reference shows ``x`` rather than the role's markup.

Registered in ``mkdocs.yml`` (``plugins: mkdocstrings: handlers: python: options: extensions``) and used by
``generate.py`` for the module list.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|meth|mod|class|attr|data|exc|obj|const|ref):`[~.]*([^`]+)`")


def plain(text: str) -> str:
    """``text`` with every Sphinx role replaced by a code span of its target."""
    return ROLE.sub(r"`\1`", text)


class RstRoles(griffe.Extension):
    """Rewrites each docstring as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
