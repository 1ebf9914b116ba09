"""Dependencies shared by the routers: settings, database sessions."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Query, Request
from pydantic import BaseModel, create_model
from sqlmodel import Session

from emuplan.settings import Settings
from emuplan.store.db import Database
from emuplan.store.rows import INT64_MAX, DatabaseInt  # noqa: F401  (the routers' path and query types)


def get_settings_dep(request: Request) -> Settings:
    return request.app.state.settings


def get_database(request: Request) -> Database:
    return request.app.state.database


def get_read_session(request: Request) -> Iterator[Session]:
    with request.app.state.database.read_session() as session:
        yield session


def get_write_session(request: Request) -> Iterator[Session]:
    """A session whose transaction starts with BEGIN IMMEDIATE on SQLite; the route commits."""
    with request.app.state.database.write_session() as session:
        yield session


def id_or_none(text: str) -> int | None:
    """A filter's id from the query string; anything that cannot be a stored id filters nothing."""
    return int(text) if text.isdigit() and int(text) <= INT64_MAX else None


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
DatabaseDep = Annotated[Database, Depends(get_database)]
# A stored list's page (``GET /api/plans``, ``/api/models``): how many rows, after how many.
ListLimit = Annotated[int, Query(ge=1, le=1000)]
ListOffset = Annotated[int, Query(ge=0, le=INT64_MAX)]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
WriteSessionDep = Annotated[Session, Depends(get_write_session)]


def response_model_of(columns: type[tuple], name: str) -> type[BaseModel]:
    """A response model with the fields (names and types) of a store list's item (a NamedTuple): what a list
    answers with is defined once, by the columns the store reads for it."""
    return create_model(name, **{field: (kind, ...) for field, kind in columns.__annotations__.items()})
