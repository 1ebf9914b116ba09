"""Simulation jobs in the database: any server worker starts, reports and cancels them; only the worker that
started one runs it (``api/simulation_jobs.py``). Heartbeat and staleness work as for measurement jobs
(``store.measurement_jobs``): a worker that dies mid-job stops writing ``heartbeat_at``, and after
``STALE_AFTER`` without one its job reads as failed. Simulations hold no host: the server process bounds how
many it runs at once."""

from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select, update

from emuplan.store.db import Database
from emuplan.store.measurement_jobs import KEPT_FINISHED_JOBS, STALE_AFTER
from emuplan.store.models import SimulationJobRecord, utc_now
from emuplan.store.rows import NotFound

ACTIVE_STATES = ("starting", "exporting", "simulating")
GONE_ERROR = "the server process running this simulation stopped"


class SimulationJobNotFound(NotFound):
    pass


def _fail_stale_jobs(session: Session, now: datetime) -> None:
    session.exec(
        update(SimulationJobRecord)
        .where(col(SimulationJobRecord.state).in_(ACTIVE_STATES))
        .where(col(SimulationJobRecord.heartbeat_at) < now - STALE_AFTER)
        .values(state="failed", error=GONE_ERROR, finished_at=now)
    )


def create_job(database: Database, job_id: str, plan_id: int, request: dict[str, Any]) -> SimulationJobRecord:
    """Record a new job; the oldest finished ones beyond ``KEPT_FINISHED_JOBS`` (results included) are forgotten."""
    now = utc_now()
    record = SimulationJobRecord(id=job_id, plan_id=plan_id, request=request, state="starting", heartbeat_at=now,
                                 started_at=now)  # fmt: skip
    with database.writing() as session:
        _fail_stale_jobs(session, now)
        finished = session.exec(
            select(SimulationJobRecord.id)
            .where(col(SimulationJobRecord.state).not_in(ACTIVE_STATES))
            .order_by(col(SimulationJobRecord.started_at).desc())
            .offset(KEPT_FINISHED_JOBS - 1)  # the job about to start takes a place
        ).all()
        for old_id in finished:
            session.delete(session.get(SimulationJobRecord, old_id))
        session.add(record)
    return record


def beat(database: Database, job_id: str, **progress: Any) -> bool:
    """The running worker's heartbeat with its latest progress; whether a cancel was asked for."""
    with database.writing() as session:
        session.exec(
            update(SimulationJobRecord)
            .where(SimulationJobRecord.id == job_id)
            .where(col(SimulationJobRecord.state).in_(ACTIVE_STATES))
            .values(heartbeat_at=utc_now(), **progress)
        )
        return bool(
            session.exec(select(SimulationJobRecord.cancel_requested).where(SimulationJobRecord.id == job_id)).first()
        )


def finish(database: Database, job_id: str, state: str, **fields: Any) -> None:
    now = utc_now()
    with database.writing() as session:
        session.exec(
            update(SimulationJobRecord)
            .where(SimulationJobRecord.id == job_id)
            .values(state=state, finished_at=now, heartbeat_at=now, **fields)
        )


def request_cancel(database: Database, job_id: str) -> SimulationJobRecord:
    """Ask the worker running the job to cancel it (it polls the flag); a finished job stays as it is."""
    with database.writing() as session:
        job = _get(session, job_id)
        if job.state in ACTIVE_STATES:
            job.cancel_requested = True
            session.add(job)
        return job


def _get(session: Session, job_id: str) -> SimulationJobRecord:
    job = session.get(SimulationJobRecord, job_id)
    if job is None:
        raise SimulationJobNotFound(f"no simulation job {job_id!r}")
    return job


def read_job(database: Database, job_id: str) -> SimulationJobRecord:
    with database.read_session() as session:
        job = _get(session, job_id)
    if job.state in ACTIVE_STATES and job.heartbeat_at < utc_now() - STALE_AFTER:
        with database.writing() as session:
            _fail_stale_jobs(session, utc_now())
            job = _get(session, job_id)
    return job


def list_jobs(database: Database, plan_id: int | None = None) -> list[SimulationJobRecord]:
    """The last jobs (of one plan, when given), newest first."""
    statement = select(SimulationJobRecord).order_by(col(SimulationJobRecord.started_at).desc())
    if plan_id is not None:
        statement = statement.where(SimulationJobRecord.plan_id == plan_id)
    with database.read_session() as session:
        jobs = list(session.exec(statement.limit(KEPT_FINISHED_JOBS)).all())
    if any(job.state in ACTIVE_STATES and job.heartbeat_at < utc_now() - STALE_AFTER for job in jobs):
        with database.writing() as session:
            _fail_stale_jobs(session, utc_now())
            jobs = list(session.exec(statement.limit(KEPT_FINISHED_JOBS)).all())
    return jobs
