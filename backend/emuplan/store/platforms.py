"""The ``platform`` table: the profiles users add (``services.platforms`` checks them, adds the built-in ones and
judges the runs again), and the runs and plans that name a profile (``run.platform``, ``plan.platform``; migration
0012 says why by name).
"""

from collections.abc import Iterable
from typing import NamedTuple

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select, update

from emuplan.errors import EmuplanError
from emuplan.store.rows import NotFound
from emuplan.store.tables import Plan, Run, StoredPlatform, utc_now
from emuplan.workload.platforms import BUILTIN_PLATFORMS


class PlatformNotFound(NotFound):
    pass


class PlatformExists(EmuplanError, ValueError):
    """The name is taken, by a built-in or a stored profile: HTTP 409."""

    http_status = 409


class BuiltinPlatform(EmuplanError, ValueError):
    """A built-in profile cannot be edited or deleted: HTTP 409."""

    http_status = 409

    def __init__(self, name: str, action: str):
        super().__init__(
            f"{name}: a built-in platform cannot be {action}; add one of your own under another name "
            f"(its figures copied and changed) instead"
        )


class Detached(NamedTuple):
    """The runs and plans that named a deleted profile and now have none."""

    run_ids: list[int]
    runs: int
    plans: int


def stored_platform(session: Session, name: str) -> StoredPlatform | None:
    return session.exec(select(StoredPlatform).where(StoredPlatform.name == name)).first()


def stored_platforms(session: Session) -> list[StoredPlatform]:
    """Every stored profile, by name."""
    return list(session.exec(select(StoredPlatform).order_by(col(StoredPlatform.name))).all())


def stored_titles(session: Session) -> list[tuple[str, str]]:
    """Every stored profile's name and title, by name."""
    statement = select(StoredPlatform.name, StoredPlatform.title).order_by(col(StoredPlatform.name))
    return [tuple(row) for row in session.exec(statement)]


def platform_exists(session: Session, name: str) -> bool:
    """Whether a built-in or a stored profile has this name."""
    return name in BUILTIN_PLATFORMS or stored_platform(session, name) is not None


def references(session: Session, table: type[Run] | type[Plan]) -> dict[str, int]:
    """How many rows of ``table`` name each platform."""
    statement = select(table.platform, func.count()).where(col(table.platform).is_not(None)).group_by(table.platform)
    return dict(session.exec(statement).all())


def references_to(session: Session, name: str) -> tuple[int, int]:
    """How many runs and plans name the platform ``name``."""
    count = func.count()
    runs = session.exec(select(count).select_from(Run).where(Run.platform == name)).one()
    plans = session.exec(select(count).select_from(Plan).where(Plan.platform == name)).one()
    return runs, plans


def runs_named(session: Session, name: str | None = None, run_ids: Iterable[int] | None = None) -> list[Run]:
    """The runs that name the platform ``name``, or those of ``run_ids``."""
    if run_ids is not None:
        return list(session.exec(select(Run).where(col(Run.id).in_(list(run_ids)))))
    return list(session.exec(select(Run).where(Run.platform == name)))


def _flush_named(session: Session, name: str) -> None:
    """Flushes the profile named ``name``. On PostgreSQL two transactions may both have found the name free;
    the unique index refuses the second, which is then told as the check would have told it."""
    try:
        session.flush()
    except IntegrityError:
        raise PlatformExists(f"name: a platform named {name!r} exists already") from None


def add_stored_platform(session: Session, figures: dict) -> None:
    """Adds a row of these column values (flushed; the caller commits)."""
    session.add(StoredPlatform(**figures))
    _flush_named(session, figures["name"])


def replace_stored_platform(session: Session, row: StoredPlatform, figures: dict) -> None:
    """Replaces the row's column values; a new name is carried to the runs and plans that named the old one."""
    if figures["name"] != row.name:
        for table in (Run, Plan):
            session.exec(update(table).where(col(table.platform) == row.name).values(platform=figures["name"]))
    for column, value in figures.items():
        setattr(row, column, value)
    row.updated_at = utc_now()
    session.add(row)
    _flush_named(session, row.name)


def delete_stored_platform(session: Session, row: StoredPlatform) -> Detached:
    """Removes the row; the runs and plans that named it are left with no platform."""
    run_ids = list(session.exec(select(Run.id).where(Run.platform == row.name)))
    detached = {
        table: session.exec(update(table).where(col(table.platform) == row.name).values(platform=None)).rowcount
        for table in (Run, Plan)
    }
    session.delete(row)
    session.flush()
    return Detached(run_ids, runs=detached[Run], plans=detached[Plan])
