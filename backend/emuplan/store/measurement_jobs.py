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
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from emuplan.errors import EmuplanError
from emuplan.store.db import Database
from emuplan.store.job_records import HEARTBEAT_S as HEARTBEAT_S  # what api/jobs.py and the tests read here
from emuplan.store.job_records import KEPT_FINISHED_JOBS, JobTable
from emuplan.store.job_records import STALE_AFTER as STALE_AFTER
from emuplan.store.models import MeasurementJobRecord, utc_now
from emuplan.store.rows import NotFound

ACTIVE_STATES = ("starting", "running", "storing")


class MeasurementJobNotFound(NotFound):
    pass


# A job that ends, however it ends, frees the host it held.
_jobs = JobTable(MeasurementJobRecord, ACTIVE_STATES, MeasurementJobNotFound, "measurement", {"running_on": None})
GONE_ERROR = _jobs.gone_error


class MeasurementBusy(EmuplanError):
    """A second measurement on a host while one runs there: 409, with the running job as ``Location``."""

    http_status = 409

    def __init__(self, running_job_id: str):
        super().__init__(f"a measurement is already running (job {running_job_id}); wait for it or cancel it")
        self.location = f"/api/measurements/{running_job_id}"


def server_host() -> str:
    return socket.gethostname()


def claim_host(database: Database, job_id: str, plan_id: int, request: dict[str, Any]) -> MeasurementJobRecord:
    """Record a new job as active on this host; ``MeasurementBusy`` when one is active here already."""
    host = server_host()
    now = utc_now()
    with database.writing() as session:
        _jobs.fail_stale(session, now)
        _jobs.forget_old(session)
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


beat = _jobs.beat
finish = _jobs.finish  # the final state, and the host is free again
request_cancel = _jobs.request_cancel
read_job = _jobs.read
wait_while_active = _jobs.wait_while_active


def list_jobs(database: Database) -> list[MeasurementJobRecord]:
    """The active jobs and the last finished ones, newest first."""
    return _jobs.newest(database, KEPT_FINISHED_JOBS + 1)
