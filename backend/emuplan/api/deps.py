"""Dependencies shared by the routers: settings, database sessions."""

from collections.abc import Iterator
from typing import Annotated

from annotated_types import Interval
from fastapi import Depends, Request
from pydantic import BaseModel, create_model
from sqlmodel import Session

from emuplan.settings import Settings
from emuplan.store.db import Database


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

SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
DatabaseDep = Annotated[Database, Depends(get_database)]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
WriteSessionDep = Annotated[Session, Depends(get_write_session)]


def response_model_of(columns: type[tuple], name: str) -> type[BaseModel]:
    """A response model with the fields (names and types) of a store list's item (a NamedTuple): what a list
    answers with is defined once, by the columns the store reads for it."""
    return create_model(name, **{field: (kind, ...) for field, kind in columns.__annotations__.items()})
