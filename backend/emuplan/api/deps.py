"""Dependencies shared by the routers: settings, database sessions."""

import threading
from collections.abc import Callable, Iterator
from typing import Annotated, TypeVar

from annotated_types import Interval
from fastapi import Depends, Request
from pydantic import BaseModel, create_model
from sqlmodel import Session

from emuplan.settings import Settings
from emuplan.store.db import Database

T = TypeVar("T")


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


# Ids and offsets are int64 in the database; a larger number in a path, query or body is refused with
# 422 here instead of failing in the database driver (500).
INT64_MAX = 2**63 - 1
DatabaseInt = Annotated[int, Interval(ge=0, le=INT64_MAX)]


def id_or_none(text: str) -> int | None:
    """A filter's id from the query string; anything that cannot be a stored id filters nothing."""
    return int(text) if text.isdigit() and int(text) <= INT64_MAX else None


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
DatabaseDep = Annotated[Database, Depends(get_database)]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
WriteSessionDep = Annotated[Session, Depends(get_write_session)]


def response_model_of(columns: type[tuple], name: str) -> type[BaseModel]:
    """A response model with the fields (names and types) of a store list's item (a NamedTuple): what a list
    answers with is defined once, by the columns the store reads for it."""
    return create_model(name, **{field: (kind, ...) for field, kind in columns.__annotations__.items()})


_REGISTRY_CREATION_LOCK = threading.Lock()


def app_registry(request: Request, name: str, factory: Callable[[], T]) -> T:
    """The app's one ``name`` object (a job registry), made by ``factory`` on first use: requests run on
    several threads, so the first two must not make two."""
    state = request.app.state
    with _REGISTRY_CREATION_LOCK:
        if not hasattr(state, name):
            setattr(state, name, factory())
    return getattr(state, name)
