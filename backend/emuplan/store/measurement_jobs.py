"""Measurement jobs in the database: any server worker (or instance on the same database) starts,
reports and cancels them; only the worker that started one runs it (``api/jobs.py``).

One measurement at a time per server host: a job holds its host's name in the UNIQUE column
``running_on`` while active, so a second start on the same host fails at the insert, atomically, on
SQLite and PostgreSQL alike. A row was chosen over a PostgreSQL advisory lock because it works on both
databases, needs no connection held open for the whole measurement, and tells every worker which job
holds the host. A worker that dies mid-job stops writing ``heartbeat_at``; after ``STALE_AFTER``
without one the job is failed and the host is free again.
"""

import socket
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select, update

from emuplan.store.db import Database
from emuplan.store.models import MeasurementJobRecord, utc_now
from emuplan.store.rows import NotFound

ACTIVE_STATES = ("starting", "running", "storing")
KEPT_FINISHED_JOBS = 20
# The running worker writes its heartbeat (and reads the cancel flag) every HEARTBEAT_S.
HEARTBEAT_S = 0.5
STALE_AFTER = timedelta(seconds=30)
GONE_ERROR = "the server process running this measurement stopped"


class MeasurementJobNotFound(NotFound):
    pass


class MeasurementBusy(Exception):
    """A second measurement on a host while one runs there: 409, with the running job as ``Location``."""

    def __init__(self, running_job_id: str):
        super().__init__(f"a measurement is already running (job {running_job_id}); wait for it or cancel it")
        self.location = f"/api/measurements/{running_job_id}"


def server_host() -> str:
    return socket.gethostname()


def _fail_stale_jobs(session: Session, now: datetime) -> None:
    session.exec(
        update(MeasurementJobRecord)
        .where(col(MeasurementJobRecord.state).in_(ACTIVE_STATES))
        .where(col(MeasurementJobRecord.heartbeat_at) < now - STALE_AFTER)
        .values(state="failed", error=GONE_ERROR, running_on=None, finished_at=now)
    )


def _forget_old_jobs(session: Session) -> None:
    finished = session.exec(
        select(MeasurementJobRecord.id)
        .where(col(MeasurementJobRecord.state).not_in(ACTIVE_STATES))
        .order_by(col(MeasurementJobRecord.started_at).desc())
        .offset(KEPT_FINISHED_JOBS - 1)  # the job about to start takes a place
    ).all()
    for job_id in finished:
        session.delete(session.get(MeasurementJobRecord, job_id))


def claim_host(database: Database, job_id: str, plan_id: int, request: dict[str, Any]) -> MeasurementJobRecord:
    """Record a new job as active on this host; ``MeasurementBusy`` when one is active here already."""
    host = server_host()
    now = utc_now()
    with database.writing() as session:
        _fail_stale_jobs(session, now)
        _forget_old_jobs(session)
    record = MeasurementJobRecord(
        id=job_id, plan_id=plan_id, request=request, state="starting", host=host, running_on=host,
        heartbeat_at=now, started_at=now,
    )  # fmt: skip
    try:
        with database.writing() as session:
            session.add(record)
    except IntegrityError:
        with database.read_session() as session:
            running = session.exec(select(MeasurementJobRecord).where(MeasurementJobRecord.running_on == host)).first()
        # The holder may have finished between the insert and this read: still busy for this start.
        raise MeasurementBusy(running.id if running else "unknown") from None
    return record


def beat(database: Database, job_id: str, **progress: Any) -> bool:
    """The running worker's heartbeat with its latest progress; whether a cancel was asked for."""
    with database.writing() as session:
        session.exec(
            update(MeasurementJobRecord)
            .where(MeasurementJobRecord.id == job_id)
            .where(col(MeasurementJobRecord.state).in_(ACTIVE_STATES))
            .values(heartbeat_at=utc_now(), **progress)
        )
        return bool(
            session.exec(select(MeasurementJobRecord.cancel_requested).where(MeasurementJobRecord.id == job_id)).first()
        )


def finish(database: Database, job_id: str, state: str, **fields: Any) -> None:
    """The job's final state: the host is free again."""
    now = utc_now()
    with database.writing() as session:
        session.exec(
            update(MeasurementJobRecord)
            .where(MeasurementJobRecord.id == job_id)
            .values(state=state, running_on=None, finished_at=now, heartbeat_at=now, **fields)
        )


def request_cancel(database: Database, job_id: str) -> MeasurementJobRecord:
    """Ask the worker running the job to cancel it (it polls the flag); a finished job stays as it is."""
    with database.writing() as session:
        job = get_job(session, job_id)
        if job.state in ACTIVE_STATES:
            job.cancel_requested = True
            session.add(job)
        return job


def get_job(session: Session, job_id: str) -> MeasurementJobRecord:
    job = session.get(MeasurementJobRecord, job_id)
    if job is None:
        raise MeasurementJobNotFound(f"no measurement job {job_id!r}")
    return job


def _is_stale(job: MeasurementJobRecord, now: datetime) -> bool:
    return job.state in ACTIVE_STATES and job.heartbeat_at < now - STALE_AFTER


def read_job(database: Database, job_id: str) -> MeasurementJobRecord:
    with database.read_session() as session:
        job = get_job(session, job_id)
    if _is_stale(job, utc_now()):
        with database.writing() as session:
            _fail_stale_jobs(session, utc_now())
            job = get_job(session, job_id)
    return job


def list_jobs(database: Database) -> list[MeasurementJobRecord]:
    """The active jobs and the last finished ones, newest first."""
    statement = select(MeasurementJobRecord).order_by(col(MeasurementJobRecord.started_at).desc())
    with database.read_session() as session:
        jobs = list(session.exec(statement.limit(KEPT_FINISHED_JOBS + 1)).all())
    if any(_is_stale(job, utc_now()) for job in jobs):
        with database.writing() as session:
            _fail_stale_jobs(session, utc_now())
            jobs = list(session.exec(statement.limit(KEPT_FINISHED_JOBS + 1)).all())
    return jobs
