"""Parameters where a client does not bind ``?`` placeholders as sqlrp writes them: each ``?`` found
outside string literals, quoted identifiers and comments (the engine's own quoting rules) becomes
either a literal of its value (:func:`bind_literals`, :func:`scalar_literal`: ClickHouse, DataFusion,
Hyper) or a SQLAlchemy ``text()`` bind (:func:`to_named`).  User text is never pasted into SQL as SQL."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from sqlglot import exp

from ..core.errors import InvalidParameter
from .values import py


def quoting_tokens(marks: str = "?", backslash: bool = False, backticks: bool = False) -> re.Pattern[str]:
    """The tokens :func:`bind_literals` (and PostgreSQL's placeholder rewrite) scan ``sql`` for: string
    literals, double-quoted identifiers (and backquoted ones with ``backticks``) and comments, each left
    as it is, and each character of ``marks`` outside them.  A doubled quote escapes itself; with
    ``backslash`` a backslash escapes the next character too (ClickHouse)."""
    quoted = []
    for q in "'\"" + ("`" if backticks else ""):
        inner = f"[^{q}\\\\]|\\\\." if backslash else f"[^{q}]"
        quoted.append(f"{q}(?:{inner}|{q}{q})*{q}")
    mark = re.escape(marks) if len(marks) == 1 else f"[{marks}]"
    return re.compile("|".join([*quoted, r"--[^\n]*", r"/\*.*?\*/", mark]), re.DOTALL)


def bind_literals(
    sql: str, params: Sequence[Any] | None, tokens: re.Pattern[str], literal: Callable[[Any], str], engine: str
) -> str:
    """``sql`` with each ``?`` that ``tokens`` finds outside quotes and comments (the engine's own
    quoting rules) replaced by ``literal`` of the next parameter, for engines whose client binds no
    ``?`` (ClickHouse, DataFusion); ``sql`` unchanged if ``params`` is None.  :class:`InvalidParameter`
    naming ``engine`` if the counts differ."""
    if params is None:
        return sql
    values = list(params)
    used = 0

    def replace(m: re.Match[str]) -> str:
        nonlocal used
        if m.group(0) != "?":
            return m.group(0)
        if used >= len(values):
            raise InvalidParameter(f"{engine}: the statement has more ? placeholders than the {len(values)} parameters")
        used += 1
        return literal(values[used - 1])

    out = tokens.sub(replace, sql)
    if used != len(values):
        raise InvalidParameter(f"{engine}: {len(values)} parameters for {used} ? placeholders")
    return out


def scalar_literal(
    value: Any, double: str, binary: Callable[[bytes], str], array: Callable[[list], str] | None = None
) -> str:
    """``value`` as a SQL literal for the engines whose client binds no ``?`` (:func:`bind_literals`):
    NULL, a boolean, a number (parenthesised, so that ``x -?`` never becomes the comment ``x --1``; NaN
    and infinities as ``CAST('NaN' AS <double>)``), bytes through ``binary``, a list through ``array``
    (refused without it), anything else a string quoted by sqlglot; dates and timestamps as text."""
    value = py(value, dates_as_text=True)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return f"({value})"
    if isinstance(value, float):
        if np.isnan(value) or np.isinf(value):
            text = "NaN" if np.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            return f"CAST('{text}' AS {double})"
        return f"({value!r})"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return binary(bytes(value))
    if isinstance(value, list) and array is not None:
        return array(value)
    return exp.Literal.string(str(value)).sql("postgres")


@functools.cache
def _text_bind() -> re.Pattern[str]:
    """What ``text()`` takes for a bind: SQLAlchemy's own pattern where it has one (2.0, 2.1)."""
    try:
        from sqlalchemy.sql.elements import TextClause

        return TextClause._bind_params_regex  # type: ignore[attr-defined,no-any-return]
    except (ImportError, AttributeError):
        return re.compile(r"(?<![:\w\x5c]):(\w+)(?![:\w])", re.UNICODE)


def _segments(sql: str, brackets: bool = False, backslash: bool = False) -> Iterator[tuple[bool, str]]:
    """Split ``sql`` into ``(quoted, text)`` pieces: string literals, quoted identifiers (double
    quotes, backticks, ``[...]`` if ``brackets``) and comments are ``quoted``.  A doubled quote
    character escapes itself; ``backslash``: a backslash escapes the next character in strings (MySQL)."""
    closers = {"'": "'", '"': '"', "`": "`"}
    if brackets:
        closers["["] = "]"
    i, start, n = 0, 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in closers or sql.startswith(("--", "/*"), i):
            if i > start:
                yield False, sql[start:i]
            if ch == "-":
                end = sql.find("\n", i)
                end = n if end < 0 else end + 1
            elif ch == "/" and sql[i + 1] == "*":
                end = sql.find("*/", i + 2)
                end = n if end < 0 else end + 2
            else:
                close, end = closers[ch], i + 1
                while end < n:
                    if backslash and ch == "'" and sql[end] == "\\":
                        end += 2
                        continue
                    if sql[end] == close:
                        if end + 1 < n and sql[end + 1] == close:  # doubled: an escaped quote
                            end += 2
                            continue
                        end += 1
                        break
                    end += 1
            yield True, sql[i:end]
            i = start = end
        else:
            i += 1
    if start < n:
        yield False, sql[start:]


def to_named(sql: str, brackets: bool = False, backslash: bool = False) -> tuple[str, list[str]]:
    """``sql`` with each ``?`` placeholder (outside quotes and comments) replaced by a ``text()``
    bind ``:p0, :p1 ...``, every other ``:name`` escaped so that ``text()`` leaves it alone; returns
    the text and the bind names in order."""
    if "\\:" in sql:
        # text() turns "\:name" into ":name" wherever it is, and a backslash cannot be escaped there
        raise InvalidParameter("cannot bind parameters in SQL that contains a backslash before ':'")
    out: list[str] = []
    names: list[str] = []
    for quoted, piece in _segments(sql, brackets, backslash):
        piece = _text_bind().sub(lambda m: "\\:" + m.group(1), piece)
        if quoted:
            out.append(piece)
            continue
        for j, part in enumerate(piece.split("?")):
            if j:
                before = next((text[-1] for text in reversed(out) if text), " ")
                bind = f":p{len(names)}"
                names.append(bind[1:])
                if re.match(r"[:\w\x5c]", before):  # a bind must not follow a word character or a colon
                    bind = " " + bind
                if re.match(r"[:\w]", part[:1] or " "):  # ... nor run into one
                    bind += " "
                out.append(bind)
            out.append(part)
    return "".join(out), names


__all__ = ["bind_literals", "quoting_tokens", "scalar_literal", "to_named"]
