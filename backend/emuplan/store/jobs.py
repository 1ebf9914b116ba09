"""Background jobs in the database, whatever they run (``services/jobs/``): one ``job`` row each, that any server
worker reads and may ask to cancel, and that only the worker running the job writes, with its state, progress and
``heartbeat_at`` every ``HEARTBEAT_S``. A worker that dies mid-job stops beating; after ``STALE_AFTER`` without a
beat its job reads as failed. The last ``KEPT_FINISHED_JOBS`` finished jobs of each kind are kept.

One state machine for every kind: a job is active in its kind's stages (``starting`` first, then e.g. ``running``)
and ends in one of ``FINISHED_STATES``, with ``finished_at`` set. A job's ``holds`` is freed when it ends.
"""

import socket
import time
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, delete, select, update

from emuplan.errors import EmuplanError
from emuplan.store.db import Database
from emuplan.store.rows import NotFound
from emuplan.store.tables import JobRecord, utc_now

FINISHED_STATES = ("succeeded", "failed", "cancelled")
# The running worker writes its heartbeat (and reads the cancel flag) every HEARTBEAT_S.
HEARTBEAT_S = 0.5
STALE_AFTER = timedelta(seconds=30)
KEPT_FINISHED_JOBS = 20
# How long a cancel waits for the worker running the job to end it, and how often it looks.
CANCEL_WAIT_S = 15.0
CANCEL_POLL_S = 0.1


class JobNotFound(NotFound):
    pass


class JobBusy(EmuplanError):
    """A job refused while another holds what it needs: 409, with the holder as ``Location`` when there is one."""

    http_status = 409

    def __init__(self, message: str, location: str | None = None):
        super().__init__(message)
        self.location = location


class HoldTaken(Exception):
    """What a new job holds is held by the active job ``holder`` (``None``: it ended meanwhile)."""

    def __init__(self, holder: str | None):
        super().__init__(f"held by job {holder}")
        self.holder = holder


def server_host() -> str:
    return socket.gethostname()


def gone_error(kind: str) -> str:
    return f"the server process running this {kind} stopped"


def is_active(job: JobRecord) -> bool:
    return job.state not in FINISHED_STATES


def _active() -> Any:
    return col(JobRecord.state).not_in(FINISHED_STATES)


def _fail_stale(session: Session, now: datetime) -> None:
    stale = session.exec(select(JobRecord).where(_active()).where(col(JobRecord.heartbeat_at) < now - STALE_AFTER))
    for job in stale.all():
        job.sqlmodel_update({"state": "failed", "error": gone_error(job.kind), "finished_at": now, "holds": None})
        session.add(job)
    session.flush()


def _forget_old(session: Session, kind: str) -> None:
    """Makes room for a new job: the kind's finished ones past the last ``KEPT_FINISHED_JOBS`` - 1 are deleted."""
    finished = session.exec(
        select(JobRecord.id)
        .where(JobRecord.kind == kind)
        .where(col(JobRecord.state).in_(FINISHED_STATES))
        .order_by(col(JobRecord.started_at).desc())
        .offset(KEPT_FINISHED_JOBS - 1)  # the job about to start takes a place
    ).all()
    if finished:
        session.exec(delete(JobRecord).where(col(JobRecord.id).in_(finished)))


def create(database: Database, job: JobRecord) -> JobRecord:
    """Record a new job (``starting``, beating now); ``HoldTaken`` when another active job holds its ``holds``."""
    now = utc_now()
    job.sqlmodel_update({"state": "starting", "host": server_host(), "heartbeat_at": now, "started_at": now})
    try:
        with database.writing() as session:
            _fail_stale(session, now)
            _forget_old(session, job.kind)
            session.add(job)
    except IntegrityError:
        raise HoldTaken(holder(database, job.holds)) from None
    return job


def holder(database: Database, holds: str | None) -> str | None:
    """The active job that holds ``holds`` (one whose worker stopped beating holds nothing)."""
    with database.read_session() as session:
        return session.exec(
            select(JobRecord.id)
            .where(JobRecord.holds == holds)
            .where(_active())
            .where(JobRecord.heartbeat_at >= utc_now() - STALE_AFTER)
        ).first()


def beat(database: Database, job_id: str, state: str | None = None, **progress: Any) -> bool:
    """The running worker's heartbeat with its stage and latest progress; whether a cancel was asked for."""
    with database.writing() as session:
        session.exec(
            update(JobRecord)
            .where(JobRecord.id == job_id)
            .where(_active())
            .values(heartbeat_at=utc_now(), progress=progress, **({} if state is None else {"state": state}))
        )
        return bool(session.exec(select(JobRecord.cancel_requested).where(JobRecord.id == job_id)).first())


def finish(database: Database, job_id: str, state: str, progress: dict[str, Any], **outcome: Any) -> None:
    """The job's end: a state of ``FINISHED_STATES``, its last progress and its ``result`` or ``error``."""
    now = utc_now()
    with database.writing() as session:
        session.exec(
            update(JobRecord)
            .where(JobRecord.id == job_id)
            .values(state=state, progress=progress, finished_at=now, heartbeat_at=now, holds=None, **outcome)
        )


def succeed_unless_cancelled(session: Session, job_id: str, progress: dict[str, Any]) -> bool:
    """In the job's last transaction, the one that makes its work visible: the job marked succeeded, unless a
    cancel was asked for (False: the caller rolls back). A cancel and the end are thus one or the other."""
    job = get(session, job_id)
    if job.cancel_requested:
        return False
    now = utc_now()
    job.sqlmodel_update(
        {"state": "succeeded", "progress": progress, "finished_at": now, "heartbeat_at": now, "holds": None}
    )
    session.add(job)
    return True


def request_cancel(database: Database, job_id: str, kind: str | None = None) -> JobRecord:
    """Ask the worker running the job to cancel it (it polls the flag); a finished job stays as it is."""
    with database.writing() as session:
        job = get(session, job_id, kind)
        if is_active(job):
            job.cancel_requested = True
            session.add(job)
        return job


def wait_while_active(database: Database, job: JobRecord) -> JobRecord:
    """``job`` as it is once it has ended, or after ``CANCEL_WAIT_S`` (a cancel answers with the end)."""
    deadline = time.monotonic() + CANCEL_WAIT_S
    while is_active(job) and time.monotonic() < deadline:
        time.sleep(CANCEL_POLL_S)
        job = read(database, job.id)
    return job


def get(session: Session, job_id: str, kind: str | None = None) -> JobRecord:
    """The job; ``JobNotFound`` when there is none (or it is not of ``kind``, when given)."""
    job = session.get(JobRecord, job_id)
    if job is None or kind not in (None, job.kind):
        raise JobNotFound(f"no {kind} job {job_id!r}" if kind else f"no job {job_id!r}")
    return job


def _is_stale(job: JobRecord, now: datetime) -> bool:
    return is_active(job) and job.heartbeat_at < now - STALE_AFTER


def read(database: Database, job_id: str, kind: str | None = None) -> JobRecord:
    with database.read_session() as session:
        job = get(session, job_id, kind)
    if _is_stale(job, utc_now()):
        with database.writing() as session:
            _fail_stale(session, utc_now())
            job = get(session, job_id, kind)
    return job


def newest(database: Database, limit: int = KEPT_FINISHED_JOBS, **equal: Any) -> list[JobRecord]:
    """The newest jobs (those whose columns equal ``equal``, e.g. ``kind``), stale ones read as failed."""
    statement = select(JobRecord).order_by(col(JobRecord.started_at).desc()).limit(limit)
    for name, value in equal.items():
        statement = statement.where(getattr(JobRecord, name) == value)
    with database.read_session() as session:
        jobs = list(session.exec(statement).all())
    if any(_is_stale(job, utc_now()) for job in jobs):
        with database.writing() as session:
            _fail_stale(session, utc_now())
            jobs = list(session.exec(statement).all())
    return jobs


def active_job(session: Session, kind: str, **equal: Any) -> str | None:
    """The id of an active job of ``kind`` whose columns equal ``equal`` (e.g. a plan being simulated)."""
    statement = select(JobRecord.id).where(JobRecord.kind == kind).where(_active())
    for name, value in equal.items():
        statement = statement.where(getattr(JobRecord, name) == value)
    return session.exec(statement).first()


def delete_jobs(session: Session, kind: str, **equal: Any) -> None:
    """Forget the jobs of ``kind`` whose columns equal ``equal`` (a deleted plan's simulations)."""
    statement = delete(JobRecord).where(JobRecord.kind == kind)
    for name, value in equal.items():
        statement = statement.where(getattr(JobRecord, name) == value)
    session.exec(statement)
