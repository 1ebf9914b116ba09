"""Simulation jobs in the database (``store.job_records``): any server worker starts, reports and cancels them; only
the worker that started one runs it (``api/simulation_jobs.py``) and writes its result into the row. Simulations
hold no host: the server process bounds how many it runs at once."""

from typing import Any

from emuplan.store.db import Database
from emuplan.store.job_records import KEPT_FINISHED_JOBS, JobTable
from emuplan.store.models import SimulationJobRecord, utc_now
from emuplan.store.rows import NotFound

ACTIVE_STATES = ("starting", "exporting", "simulating")


class SimulationJobNotFound(NotFound):
    pass


_jobs = JobTable(SimulationJobRecord, ACTIVE_STATES, SimulationJobNotFound, "simulation")
beat = _jobs.beat
finish = _jobs.finish
request_cancel = _jobs.request_cancel
read_job = _jobs.read
wait_while_active = _jobs.wait_while_active


def create_job(database: Database, job_id: str, plan_id: int, request: dict[str, Any]) -> SimulationJobRecord:
    """Record a new job; the oldest finished ones beyond ``KEPT_FINISHED_JOBS`` (results included) are forgotten."""
    now = utc_now()
    record = SimulationJobRecord(id=job_id, plan_id=plan_id, request=request, state="starting", heartbeat_at=now,
                                 started_at=now)  # fmt: skip
    with database.writing() as session:
        _jobs.fail_stale(session, now)
        _jobs.forget_old(session)
        session.add(record)
    return record


def list_jobs(database: Database, plan_id: int | None = None) -> list[SimulationJobRecord]:
    """The last jobs (of one plan, when given), running ones included, newest first."""
    return _jobs.newest(database, KEPT_FINISHED_JOBS, **({} if plan_id is None else {"plan_id": plan_id}))
