"""Relabel jobs in the database (``store.job_records``): a huge run's statistics computed again in the background
(``api/relabel_jobs.py``) after its collectives are relabelled or its plan link changed. Any server worker starts,
reports and cancels them; only the worker that started one runs it. One job at a time per run: a second answers
409, with the running one as ``Location``."""

from typing import Any

from sqlmodel import Session, col, select

from emuplan.errors import EmuplanError
from emuplan.store.db import Database
from emuplan.store.job_records import KEPT_FINISHED_JOBS, STALE_AFTER, JobTable
from emuplan.store.models import RelabelJobRecord, utc_now
from emuplan.store.rows import NotFound

# starting → copying (the stored tables read to disk, bytes_done of bytes_total) → summarising (DuckDB) → saving
# (the one transaction that changes the run).
ACTIVE_STATES = ("starting", "copying", "summarising", "saving")


class RelabelJobNotFound(NotFound):
    pass


class RelabelBusy(EmuplanError):
    """A second relabelling of a run while one runs: 409, with the running job as ``Location``."""

    http_status = 409

    def __init__(self, run_id: int, running_job_id: str):
        super().__init__(f"run {run_id} is being summarised again (job {running_job_id}); wait for it or cancel it")
        self.location = f"/api/relabel-jobs/{running_job_id}"


_jobs = JobTable(RelabelJobRecord, ACTIVE_STATES, RelabelJobNotFound, "relabel")
beat = _jobs.beat
finish = _jobs.finish
request_cancel = _jobs.request_cancel
read_job = _jobs.read
wait_while_active = _jobs.wait_while_active


def create_job(
    database: Database, job_id: str, run_id: int, request: dict[str, Any], bytes_total: int
) -> RelabelJobRecord:
    """Record a new job for the run unless one is running for it (``RelabelBusy``); the oldest finished ones beyond
    ``KEPT_FINISHED_JOBS`` are forgotten."""
    now = utc_now()
    record = RelabelJobRecord(id=job_id, run_id=run_id, request=request, state="starting", bytes_total=bytes_total,
                              heartbeat_at=now, started_at=now)  # fmt: skip
    with database.writing() as session:
        _jobs.fail_stale(session, now)
        _check_idle(session, run_id)
        _jobs.forget_old(session)
        session.add(record)
    return record


def check_idle(database: Database, run_id: int) -> None:
    """``RelabelBusy`` while a job runs for the run (checked before a request changes anything)."""
    with database.read_session() as session:
        _check_idle(session, run_id)


def _check_idle(session: Session, run_id: int) -> None:
    running = session.exec(
        select(RelabelJobRecord.id)
        .where(RelabelJobRecord.run_id == run_id)
        .where(col(RelabelJobRecord.state).in_(ACTIVE_STATES))
        .where(RelabelJobRecord.heartbeat_at >= utc_now() - STALE_AFTER)
    ).first()
    if running is not None:
        raise RelabelBusy(run_id, running)


def list_jobs(database: Database, run_id: int | None = None) -> list[RelabelJobRecord]:
    """The last jobs (of one run, when given), running ones included, newest first."""
    return _jobs.newest(database, KEPT_FINISHED_JOBS, **({} if run_id is None else {"run_id": run_id}))


def succeed_unless_cancelled(session: Session, job_id: str, **progress: Any) -> bool:
    """In the job's last transaction, the one that changes the run: the job marked succeeded, unless a cancel was
    asked for (False: the caller rolls back). A cancel and the end are thus one or the other, never both."""
    job = _jobs.get(session, job_id)
    if job.cancel_requested:
        return False
    now = utc_now()
    for name, value in {**progress, "state": "succeeded", "finished_at": now, "heartbeat_at": now}.items():
        setattr(job, name, value)
    session.add(job)
    return True
