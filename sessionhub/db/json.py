"""Reading one value out of a JSON column in SQL, on PostgreSQL and on SQLite alike.

A query over many stored events that needs a small part of each payload (a tool call's
input, not its output) reads that part alone: the database sends a few bytes a row
instead of the whole document, and the caller decodes a few bytes. Django's own key
transforms decode SQLite's values by the transform's type, which a ``Case`` over them
loses; these give JSON text on both databases, decoded by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.db import NotSupportedError
from django.db.models import BooleanField, Func, TextField

# The keys a path may name: SQLite's paths can name no key with a quote or a backslash,
# and match a non-ASCII key only as its stored text spells it (Django stores it escaped);
# PostgreSQL reads a key of digits as an index into an array, which SQLite does not.
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_. -]*")


def _sqlite_path(path: Sequence[str]) -> str:
    return "$" + "".join(f'."{key}"' for key in path)


class _AtPath(Func):
    """A JSON column and a key path into it (the code's own keys, never a client's)."""

    arity = 1

    def __init__(self, column: Any, path: Sequence[str], **extra: Any) -> None:
        if not path:
            raise ValueError("a key path needs at least one key")
        for key in path:
            if not _KEY.fullmatch(key):
                raise ValueError(f"{key!r}: a key path's keys are ASCII letters, digits, _ . -")
        self.path = tuple(path)
        super().__init__(column, **extra)

    def as_sql(
        self,
        compiler: Any,
        connection: Any,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> Any:
        raise NotSupportedError(f"{type(self).__name__} is written for PostgreSQL and SQLite")

    def _postgresql_value(self, compiler: Any) -> tuple[str, tuple[Any, ...]]:
        """The jsonb value at the path (SQL NULL where there is none)."""
        column, params = compiler.compile(self.source_expressions[0])
        return f"({column}) #> %s::text[]", (*params, list(self.path))


class JSONAt(_AtPath):
    """The JSON text of the value at ``path`` in ``column`` (an object, array, string,
    number, ``true``, ``false`` or ``null``, decoding to the value stored); where the path
    leads nowhere, SQL NULL on PostgreSQL and ``null`` on SQLite, both meaning None."""

    output_field = TextField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        value, params = self._postgresql_value(compiler)
        return f"({value})::text", params

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        column, params = compiler.compile(self.source_expressions[0])
        # json_extract with one path gives SQL values (a number as a double, rounded when
        # written back; a string bare; true as 1). With two paths it gives a JSON array
        # of the values' own text, "[v,v]": v is the characters between its brackets.
        pair = f"json_extract({column}, %s, %s)"
        path = _sqlite_path(self.path)
        return (
            f"substr({pair}, 2, (length({pair}) - 3) / 2)",
            (*params, path, path, *params, path, path),
        )


class JSONHas(_AtPath):
    """Whether ``path`` leads to a value in ``column`` (a JSON null counts as one)."""

    output_field = BooleanField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        value, params = self._postgresql_value(compiler)
        return f"({value}) IS NOT NULL", params

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        column, params = compiler.compile(self.source_expressions[0])
        return f"json_type({column}, %s) IS NOT NULL", (*params, _sqlite_path(self.path))
