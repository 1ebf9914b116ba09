"""Platform profiles: the built-in ones (``workload.platforms.BUILTIN_PLATFORMS``, in the code, never stored)
and those users add, edit and delete (the ``platform`` table). A name is unique across both.

Runs and plans name their platform (``run.platform``, ``plan.platform``; migration 0012 says why by name).
Renaming a stored profile renames it on its runs and plans in the same transaction; deleting it leaves them
with no platform, and says how many there were. A built-in can be neither edited nor deleted.
"""

from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select, update

from emuplan.errors import EmuplanError
from emuplan.results.verdict import judge_summary
from emuplan.store.models import Plan, Run, StoredPlatform, utc_now
from emuplan.store.rows import NotFound
from emuplan.wording import plural
from emuplan.workload.platforms import BUILTIN_PLATFORMS, Platform, make_platform


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


class PlatformTitle(NamedTuple):
    name: str
    title: str


@dataclass(frozen=True)
class PlatformEntry:
    """A profile as lists and pages show it: its figures, whether it is built in, and what names it."""

    platform: Platform
    builtin: bool
    runs: int
    plans: int

    def document(self) -> dict:
        return {
            **self.platform.model_dump(mode="json"),
            "builtin": self.builtin,
            "runs": self.runs,
            "plans": self.plans,
        }


@dataclass(frozen=True)
class Deleted:
    """What deleting a profile did: the runs and plans that named it now have no platform."""

    name: str
    runs_detached: int
    plans_detached: int

    def document(self) -> dict:
        return {"name": self.name, "runs_detached": self.runs_detached, "plans_detached": self.plans_detached}

    def message(self) -> str:
        """What deleting did, as the page and the CLI say it."""
        return (
            f"Platform {self.name} deleted; {plural(self.runs_detached, 'run')} and "
            f"{plural(self.plans_detached, 'plan')} that named it now have no platform."
        )


PLATFORM_FIELDS = tuple(Platform.model_fields)


def _figures(source: StoredPlatform | Platform) -> dict:
    """The values of ``Platform``'s fields (not its computed ones) as ``source`` holds them."""
    return {field: getattr(source, field) for field in PLATFORM_FIELDS}


def _platform_of(row: StoredPlatform) -> Platform:
    return make_platform(_figures(row))


def _stored(session: Session, name: str) -> StoredPlatform | None:
    return session.exec(select(StoredPlatform).where(StoredPlatform.name == name)).first()


def _references(session: Session, table: type[Run] | type[Plan]) -> dict[str, int]:
    """How many rows of ``table`` name each platform."""
    statement = select(table.platform, func.count()).where(col(table.platform).is_not(None)).group_by(table.platform)
    return dict(session.exec(statement).all())


def list_platforms(session: Session) -> list[PlatformEntry]:
    """The built-ins in their order, then the stored profiles by name."""
    runs, plans = _references(session, Run), _references(session, Plan)
    stored = session.exec(select(StoredPlatform).order_by(col(StoredPlatform.name))).all()
    return [
        PlatformEntry(platform, builtin, runs.get(platform.name, 0), plans.get(platform.name, 0))
        for platform, builtin in [
            *((platform, True) for platform in BUILTIN_PLATFORMS.values()),
            *((_platform_of(row), False) for row in stored),
        ]
    ]


def get_platform(session: Session, name: str) -> PlatformEntry:
    if name in BUILTIN_PLATFORMS:
        platform, builtin = BUILTIN_PLATFORMS[name], True
    else:
        row = _stored(session, name)
        if row is None:
            raise PlatformNotFound(f"no platform named {name!r}: `emuplan platforms list` shows them")
        platform, builtin = _platform_of(row), False
    count = func.count()
    runs = session.exec(select(count).select_from(Run).where(Run.platform == name)).one()
    plans = session.exec(select(count).select_from(Plan).where(Plan.platform == name)).one()
    return PlatformEntry(platform, builtin, runs, plans)


def platform_titles(session: Session) -> list[PlatformTitle]:
    """Every profile's name and title, built-ins first: what a select that picks a platform shows."""
    stored = session.exec(select(StoredPlatform.name, StoredPlatform.title).order_by(col(StoredPlatform.name)))
    return [PlatformTitle(p.name, p.title) for p in BUILTIN_PLATFORMS.values()] + [
        PlatformTitle(*row) for row in stored
    ]


def platform_named(session: Session, name: str) -> Platform | None:
    """The profile of that name (built-in or stored) without its counts of runs and plans; None if none."""
    if name in BUILTIN_PLATFORMS:
        return BUILTIN_PLATFORMS[name]
    row = _stored(session, name)
    return _platform_of(row) if row is not None else None


def platform_exists(session: Session, name: str) -> bool:
    return platform_named(session, name) is not None


def _name_free(session: Session, name: str) -> None:
    if name in BUILTIN_PLATFORMS:
        raise PlatformExists(f"name: {name!r} is a built-in platform; choose another name")
    if _stored(session, name) is not None:
        raise PlatformExists(f"name: a platform named {name!r} exists already")


def _flush_named(session: Session, name: str) -> None:
    """Flushes the profile named ``name``. On PostgreSQL two transactions may both have found the name free;
    the unique index refuses the second, which is then told as the check would have told it."""
    try:
        session.flush()
    except IntegrityError:
        raise PlatformExists(f"name: a platform named {name!r} exists already") from None


def create_platform(session: Session, values: dict) -> PlatformEntry:
    """Adds the profile (flushed; the caller commits). ``values``: ``Platform``'s fields."""
    platform = make_platform(values)
    _name_free(session, platform.name)
    session.add(StoredPlatform(**_figures(platform)))
    _flush_named(session, platform.name)
    return PlatformEntry(platform, builtin=False, runs=0, plans=0)


def update_platform(session: Session, name: str, values: dict) -> PlatformEntry:
    """Replaces the figures of the stored profile ``name``; a new name in ``values`` renames it, and its runs
    and plans follow."""
    if name in BUILTIN_PLATFORMS:
        raise BuiltinPlatform(name, "edited")
    row = _stored(session, name)
    if row is None:
        raise PlatformNotFound(f"no platform named {name!r}")
    platform = make_platform(values)
    if platform.name != name:
        _name_free(session, platform.name)
        for table in (Run, Plan):
            session.exec(update(table).where(col(table.platform) == name).values(platform=platform.name))
    for field, value in _figures(platform).items():
        setattr(row, field, value)
    row.updated_at = utc_now()
    session.add(row)
    _flush_named(session, platform.name)
    _judge_runs_again(session, platform.name)
    return get_platform(session, platform.name)


def refresh_verdict(session: Session, run: Run) -> None:
    """Store the run's verdict (``run.verdict``: what lists show) as its page judges it: its platform, its
    ranks from the file, else its linked plan. Called whenever one of those or its statistics change."""
    plan = session.get(Plan, run.plan_id) if run.plan_id is not None else None
    ranks = (plan.inputs.get("gpus") if plan is not None else None) or run.ranks  # as resolve_assumptions
    platform = platform_named(session, run.platform) if run.platform else None
    run.verdict = judge_summary(run.summary, run.kind, ranks=ranks, hosts=run.hosts, platform=platform).status


def _judge_runs_again(session: Session, name: str | None, run_ids: list[int] | None = None) -> None:
    """The stored verdicts of the runs that name ``name`` (or of ``run_ids``) after their profile changed."""
    query = (
        select(Run).where(col(Run.id).in_(run_ids)) if run_ids is not None else select(Run).where(Run.platform == name)
    )
    for run in session.exec(query):
        refresh_verdict(session, run)
        session.add(run)
    session.flush()


def delete_platform(session: Session, name: str) -> Deleted:
    """Removes the stored profile ``name``; the runs and plans that named it are left with no platform."""
    if name in BUILTIN_PLATFORMS:
        raise BuiltinPlatform(name, "deleted")
    row = _stored(session, name)
    if row is None:
        raise PlatformNotFound(f"no platform named {name!r}")
    runs_named = select(Run.id).where(Run.platform == name)
    detached_ids = list(session.exec(runs_named))
    detached = {
        table: session.exec(update(table).where(col(table.platform) == name).values(platform=None)).rowcount
        for table in (Run, Plan)
    }
    session.delete(row)
    session.flush()
    _judge_runs_again(session, None, detached_ids)
    return Deleted(name, runs_detached=detached[Run], plans_detached=detached[Plan])
