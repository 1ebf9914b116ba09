"""Platform profiles: the built-in ones (``workload.platforms.BUILTIN_PLATFORMS``, in the code, never stored)
and those users add, edit and delete (``store.platforms``). A name is unique across both.

Renaming a stored profile renames it on its runs and plans in the same transaction; deleting it leaves them
with no platform, and says how many there were; either way the stored verdicts of its runs are judged again.
A built-in can be neither edited nor deleted.
"""

from dataclasses import dataclass
from typing import NamedTuple

from sqlmodel import Session

from emuplan.results.analysis.verdict import judge_summary
from emuplan.store import platforms as rows
from emuplan.store.platforms import BuiltinPlatform, PlatformExists, PlatformNotFound
from emuplan.store.tables import Plan, Run, StoredPlatform
from emuplan.wording import plural
from emuplan.workload.platform_fields import PLATFORM_FIELDS
from emuplan.workload.platforms import BUILTIN_PLATFORMS, Platform, make_platform


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


def _figures(source: StoredPlatform | Platform) -> dict:
    """The values of the profile's fields (not its computed ones) as ``source`` holds them: a row's columns."""
    return {field: getattr(source, field) for field in PLATFORM_FIELDS}


def _platform_of(row: StoredPlatform) -> Platform:
    return make_platform(_figures(row))


def list_platforms(session: Session) -> list[PlatformEntry]:
    """The built-ins in their order, then the stored profiles by name."""
    runs, plans = rows.references(session, Run), rows.references(session, Plan)
    return [
        PlatformEntry(platform, builtin, runs.get(platform.name, 0), plans.get(platform.name, 0))
        for platform, builtin in [
            *((platform, True) for platform in BUILTIN_PLATFORMS.values()),
            *((_platform_of(row), False) for row in rows.stored_platforms(session)),
        ]
    ]


def get_platform(session: Session, name: str) -> PlatformEntry:
    if name in BUILTIN_PLATFORMS:
        platform, builtin = BUILTIN_PLATFORMS[name], True
    else:
        row = rows.stored_platform(session, name)
        if row is None:
            raise PlatformNotFound(f"no platform named {name!r}: `emuplan platforms list` shows them")
        platform, builtin = _platform_of(row), False
    return PlatformEntry(platform, builtin, *rows.references_to(session, name))


def platform_titles(session: Session) -> list[PlatformTitle]:
    """Every profile's name and title, built-ins first: what a select that picks a platform shows."""
    return [PlatformTitle(p.name, p.title) for p in BUILTIN_PLATFORMS.values()] + [
        PlatformTitle(*row) for row in rows.stored_titles(session)
    ]


def platform_named(session: Session, name: str) -> Platform | None:
    """The profile of that name (built-in or stored) without its counts of runs and plans; None if none."""
    if name in BUILTIN_PLATFORMS:
        return BUILTIN_PLATFORMS[name]
    row = rows.stored_platform(session, name)
    return _platform_of(row) if row is not None else None


def _name_free(session: Session, name: str) -> None:
    if name in BUILTIN_PLATFORMS:
        raise PlatformExists(f"name: {name!r} is a built-in platform; choose another name")
    if rows.stored_platform(session, name) is not None:
        raise PlatformExists(f"name: a platform named {name!r} exists already")


def create_platform(session: Session, values: dict) -> PlatformEntry:
    """Adds the profile (flushed; the caller commits). ``values``: ``Platform``'s fields."""
    platform = make_platform(values)
    _name_free(session, platform.name)
    rows.add_stored_platform(session, _figures(platform))
    return PlatformEntry(platform, builtin=False, runs=0, plans=0)


def update_platform(session: Session, name: str, values: dict) -> PlatformEntry:
    """Replaces the figures of the stored profile ``name``; a new name in ``values`` renames it, and its runs
    and plans follow."""
    if name in BUILTIN_PLATFORMS:
        raise BuiltinPlatform(name, "edited")
    row = rows.stored_platform(session, name)
    if row is None:
        raise PlatformNotFound(f"no platform named {name!r}")
    platform = make_platform(values)
    if platform.name != name:
        _name_free(session, platform.name)
    rows.replace_stored_platform(session, row, _figures(platform))
    _judge_again(session, rows.runs_named(session, platform.name))
    return get_platform(session, platform.name)


def delete_platform(session: Session, name: str) -> Deleted:
    """Removes the stored profile ``name``; the runs and plans that named it are left with no platform."""
    if name in BUILTIN_PLATFORMS:
        raise BuiltinPlatform(name, "deleted")
    row = rows.stored_platform(session, name)
    if row is None:
        raise PlatformNotFound(f"no platform named {name!r}")
    detached = rows.delete_stored_platform(session, row)
    _judge_again(session, rows.runs_named(session, run_ids=detached.run_ids))
    return Deleted(name, runs_detached=detached.runs, plans_detached=detached.plans)


def refresh_verdict(session: Session, run: Run) -> None:
    """Store the run's verdict (``run.verdict``: what lists show) as its page judges it: its platform, its
    ranks from the file, else its linked plan. Called whenever one of those or its statistics change."""
    plan = session.get(Plan, run.plan_id) if run.plan_id is not None else None
    ranks = (plan.inputs.get("gpus") if plan is not None else None) or run.ranks  # as resolve_assumptions
    platform = platform_named(session, run.platform) if run.platform else None
    run.verdict = judge_summary(run.summary, run.kind, ranks=ranks, hosts=run.hosts, platform=platform).status


def _judge_again(session: Session, runs: list[Run]) -> None:
    """The stored verdicts of ``runs`` after their profile changed."""
    for run in runs:
        refresh_verdict(session, run)
        session.add(run)
    session.flush()
