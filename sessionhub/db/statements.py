"""Statement machinery shared by the apps' hand-built statements: cursors that bind
server-side (and prepare once per connection), querysets compiled once per process, and
rows turned into model instances as the ORM would. Each app keeps its own statements in
its ``statements.py``; this module holds none."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

import orjson
import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model, QuerySet
from psycopg.types.json import Jsonb

ModelT = TypeVar("ModelT", bound=Model)


def concrete_fields(model: type[Model], names: Iterable[str]) -> list[Field[Any, Any]]:
    """The model's fields of these names, each a column of its table."""
    fields = [model._meta.get_field(name) for name in names]
    for field in fields:
        assert isinstance(field, Field) and field.column, field  # a column, not a relation
    return cast("list[Field[Any, Any]]", fields)


def column_of(field: Field[Any, Any]) -> str:
    """A concrete field's column name (the stubs allow None, which only relations have)."""
    assert field.column, field
    return field.column


def json_document(rows: Any) -> Jsonb | None:
    """Rows as one JSON document, encoded by orjson, for a statement that binds it as one
    server-side parameter; None where orjson will not encode them (an integer past 64
    bits, say), and the caller takes its other path."""
    try:
        return Jsonb(orjson.dumps(rows), dumps=bytes)
    except TypeError:  # orjson.JSONEncodeError
        return None


_EXPLICIT_ONLY = 2**62


class _PreparingCursor(psycopg.Cursor):
    """A cursor whose statements PostgreSQL parses and plans once per connection.

    psycopg prepares a statement under a name on its first run and then only executes it,
    so a hot statement stops costing its parse and plan on every request (the hook
    path's statement, a CTE of three parts, planned in about as long as it runs).
    """

    def execute(self, query: Any, params: Any = None, *, prepare: Any = None, **kw: Any) -> Any:
        return super().execute(query, params, prepare=prepare is not False, **kw)

    def _send_query_prepared(self, name: bytes, pgq: Any, **kw: Any) -> None:
        # psycopg keeps the statement it last ran for Django's query log, but not when it
        # runs a prepared one: without this, the log would hold None for these.
        self._query = pgq
        super()._send_query_prepared(name, pgq, **kw)


def server_bound_cursor(*, prepared: bool = False) -> Any:
    """A cursor whose statements bind their values server-side, through Django's wrapper
    all the same (query logging, execute wrappers, error translation).

    Django's own cursors bind client-side (quoting every value on the client); the hot
    path's statements send a JSON document as one ``Jsonb`` parameter instead. Django
    leaves psycopg's automatic prepare off (connection poolers in transaction mode lose
    prepared statements); ``prepared`` prepares the statements of this cursor unless
    ``SESSIONHUB_PREPARED_STATEMENTS`` is off. Typed ``Any``: the stubs know Django's
    cursor and plain parameters, not a psycopg cursor and its adapters.
    """
    # The thread's connection looked up once: each attribute read through the
    # ``connection`` proxy finds it again in the thread's connections.
    db = connections[DEFAULT_DB_ALIAS]
    # Django's per-request health check, which only its own cursors run: without it a
    # connection that broke while idle would fail the hot path's first statement
    # (a round trip only for a connection idle a while: sessionhub/db/postgresql).
    db.close_if_health_check_failed()
    db.ensure_connection()
    driver = db.connection
    prepare = prepared and settings.SESSIONHUB["PREPARED_STATEMENTS"]
    if prepare and driver.prepare_threshold is None:
        # Django turns psycopg's preparing off for the whole connection, explicit requests
        # included; back on, with a threshold no statement reaches by repetition alone.
        driver.prepare_threshold = _EXPLICIT_ONLY
    raw = (_PreparingCursor if prepare else psycopg.Cursor)(driver)
    wrap = db.make_debug_cursor if db.queries_logged else db.make_cursor
    return wrap(raw)  # type: ignore[arg-type]


@functools.cache
def model_converters(model: type[Model], vendor: str) -> list[tuple[int, list[Any], Any]]:
    """What turns a raw row of ``model``'s concrete fields (in their order) into field
    values on this database, as the ORM would apply it (nothing for a session on
    PostgreSQL; text to times and ids on SQLite; JSON decoded)."""
    table = model._meta.db_table
    converters = []
    for index, field in enumerate(model._meta.concrete_fields):
        column = field.get_col(table)
        functions = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if functions:
            converters.append((index, functions, column))
    return converters


def model_from_row(model: type[ModelT], row: Sequence[Any]) -> ModelT:
    """An instance of ``model`` from a row of its concrete fields, in their order."""
    values = list(row)
    for index, functions, column in model_converters(model, connection.vendor):
        for convert in functions:
            values[index] = convert(values[index], column, connection)
    return model.from_db(connection.alias, _attnames(model), values)


@functools.cache
def _attnames(model: type[Model]) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields]


class Compiled:
    """A queryset's statement compiled once per process, then prepared once per connection
    (PostgreSQL only: elsewhere, run the queryset).

    ``build(*values)`` makes the queryset. It is compiled once with ``stand_ins`` for the
    values, each found again among the compiled parameters, where each call's values then
    go. For the small fixed-shape reads of a hot path, whose compiling cost more CPU than
    the database spent answering them.
    """

    def __init__(self, build: Callable[..., QuerySet[Any]], *stand_ins: Any) -> None:
        self.build = build
        self.stand_ins = stand_ins

    @functools.cached_property
    def statement(self) -> tuple[str, tuple[Any, ...], type[Model]]:
        """The SQL, its parameters with the stand-ins in place, and the queryset's model."""
        query = self.build(*self.stand_ins)
        sql, params = query.query.sql_with_params()
        for stand_in in self.stand_ins:
            assert any(p == stand_in for p in params), (stand_in, params)
        return sql, tuple(params), query.model

    def rows(self, *values: Any) -> list[tuple[Any, ...]]:
        """The statement's rows for these values (in the stand-ins' order), as the database
        gives them (no converters applied); elsewhere than PostgreSQL, the queryset's (a
        queryset of model instances as its values list)."""
        if connection.vendor != "postgresql":
            query = self.build(*values)
            listed = query if query._fields else query.values_list()  # type: ignore[attr-defined]
            return [tuple(row) for row in listed]
        sql, params, _ = self.statement
        bound = dict(zip(self.stand_ins, values, strict=True))
        with server_bound_cursor(prepared=True) as cursor:
            cursor.execute(sql, [bound.get(p, p) for p in params])
            rows: list[tuple[Any, ...]] = cursor.fetchall()
            return rows

    def instances(self, *values: Any) -> list[Any]:
        """The queryset's model instances for these values (a queryset of whole rows of
        one model, nothing selected alongside)."""
        if connection.vendor != "postgresql":
            return list(self.build(*values))
        model = self.statement[2]
        return [model_from_row(model, row) for row in self.rows(*values)]
