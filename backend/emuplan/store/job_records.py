"""What background jobs share in the database, whatever they run (``store.measurement_jobs``,
``store.simulation_jobs``): a row per job that any server worker reads and may ask to cancel, and that only the
worker running the job writes, with its progress and ``heartbeat_at`` every ``HEARTBEAT_S``. A worker that dies
mid-job stops beating; after ``STALE_AFTER`` without a beat its job reads as failed. The last
``KEPT_FINISHED_JOBS`` finished jobs of a kind are kept.
"""

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from sqlmodel import Session, SQLModel, col, select, update

from emuplan.store.db import Database
from emuplan.store.models import utc_now
from emuplan.store.rows import NotFound

# The running worker writes its heartbeat (and reads the cancel flag) every HEARTBEAT_S.
HEARTBEAT_S = 0.5
STALE_AFTER = timedelta(seconds=30)
KEPT_FINISHED_JOBS = 20
# How long a cancel waits for the worker running the job to end it, and how often it looks.
CANCEL_WAIT_S = 15.0
CANCEL_POLL_S = 0.1

Record = TypeVar("Record", bound=SQLModel)


@dataclass(frozen=True)
class JobTable(Generic[Record]):
    """One kind of job's table: ``model`` has ``id``, ``state``, ``cancel_requested``, ``heartbeat_at``,
    ``started_at`` and ``finished_at``."""

    model: type[Record]
    active_states: tuple[str, ...]
    not_found: type[NotFound]
    noun: str  # "measurement": how messages name the job
    # Written with the final state, whoever ends the job (e.g. freeing the host a measurement held).
    on_end: dict[str, Any] = field(default_factory=dict)

    @property
    def gone_error(self) -> str:
        return f"the server process running this {self.noun} stopped"

    def fail_stale(self, session: Session, now: datetime) -> None:
        model = self.model
        session.exec(
            update(model)
            .where(col(model.state).in_(self.active_states))
            .where(col(model.heartbeat_at) < now - STALE_AFTER)
            .values(state="failed", error=self.gone_error, finished_at=now, **self.on_end)
        )

    def forget_old(self, session: Session) -> None:
        """Makes room for a new job: the finished ones past the last ``KEPT_FINISHED_JOBS`` - 1 are deleted."""
        model = self.model
        finished = session.exec(
            select(model.id)
            .where(col(model.state).not_in(self.active_states))
            .order_by(col(model.started_at).desc())
            .offset(KEPT_FINISHED_JOBS - 1)  # the job about to start takes a place
        ).all()
        for job_id in finished:
            session.delete(session.get(model, job_id))

    def beat(self, database: Database, job_id: str, **progress: Any) -> bool:
        """The running worker's heartbeat with its latest progress; whether a cancel was asked for."""
        model = self.model
        with database.writing() as session:
            session.exec(
                update(model)
                .where(model.id == job_id)
                .where(col(model.state).in_(self.active_states))
                .values(heartbeat_at=utc_now(), **progress)
            )
            return bool(session.exec(select(model.cancel_requested).where(model.id == job_id)).first())

    def finish(self, database: Database, job_id: str, state: str, **fields: Any) -> None:
        now = utc_now()
        with database.writing() as session:
            session.exec(
                update(self.model)
                .where(self.model.id == job_id)
                .values(state=state, finished_at=now, heartbeat_at=now, **self.on_end, **fields)
            )

    def request_cancel(self, database: Database, job_id: str) -> Record:
        """Ask the worker running the job to cancel it (it polls the flag); a finished job stays as it is."""
        with database.writing() as session:
            job = self.get(session, job_id)
            if job.state in self.active_states:
                job.cancel_requested = True
                session.add(job)
            return job

    def wait_while_active(self, database: Database, job: Record) -> Record:
        """``job`` as it is once it has ended, or after ``CANCEL_WAIT_S`` (a cancel answers with the end)."""
        deadline = time.monotonic() + CANCEL_WAIT_S
        while job.state in self.active_states and time.monotonic() < deadline:
            time.sleep(CANCEL_POLL_S)
            job = self.read(database, job.id)
        return job

    def get(self, session: Session, job_id: str) -> Record:
        job = session.get(self.model, job_id)
        if job is None:
            raise self.not_found(f"no {self.noun} job {job_id!r}")
        return job

    def _is_stale(self, job: Record, now: datetime) -> bool:
        return job.state in self.active_states and job.heartbeat_at < now - STALE_AFTER

    def read(self, database: Database, job_id: str) -> Record:
        with database.read_session() as session:
            job = self.get(session, job_id)
        if self._is_stale(job, utc_now()):
            with database.writing() as session:
                self.fail_stale(session, utc_now())
                job = self.get(session, job_id)
        return job

    def newest(self, database: Database, limit: int, **equal: Any) -> list[Record]:
        """The newest jobs (those whose columns equal ``equal``), stale ones read as failed."""
        model = self.model
        statement = select(model).order_by(col(model.started_at).desc()).limit(limit)
        for name, value in equal.items():
            statement = statement.where(getattr(model, name) == value)
        with database.read_session() as session:
            jobs = list(session.exec(statement).all())
        if any(self._is_stale(job, utc_now()) for job in jobs):
            with database.writing() as session:
                self.fail_stale(session, utc_now())
                jobs = list(session.exec(statement).all())
        return jobs
