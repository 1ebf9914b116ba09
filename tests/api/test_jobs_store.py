"""The jobs' rows (``store.jobs``), whatever their kind: one active job per thing held, the cancel flag, a dead
worker's job failed after ``STALE_AFTER`` without a heartbeat, and only the last finished jobs of a kind kept."""

import pytest
from sqlmodel import update

from emuplan.store import jobs as job_store
from emuplan.store.db import Database
from emuplan.store.tables import JobRecord, utc_now

pytestmark = pytest.mark.both_databases

REQUEST = {"world_size": 2, "backend": "gloo"}


def measurement(job_id: str) -> JobRecord:
    return JobRecord(id=job_id, kind="measurement", plan_id=1, request=REQUEST, holds="measurement on here")


def test_one_active_job_per_thing_held_and_the_cancel_flag_reaches_the_heartbeat(database: Database) -> None:
    job_store.create(database, measurement("first"))
    with pytest.raises(job_store.HoldTaken) as taken:
        job_store.create(database, measurement("second"))
    assert taken.value.holder == "first"
    assert job_store.beat(database, "first", "running", iterations_done=3) is False
    assert job_store.request_cancel(database, "first").cancel_requested is True
    assert job_store.beat(database, "first", iterations_done=4) is True
    job_store.finish(database, "first", "cancelled", {"iterations_done": 4}, error="the measurement was cancelled")
    finished = job_store.read(database, "first")
    assert (finished.state, finished.progress, finished.holds, finished.error) == (
        "cancelled",
        {"iterations_done": 4},
        None,
        "the measurement was cancelled",
    )
    # A beat after the end changes nothing; a cancel of a finished job leaves it as it is.
    assert job_store.beat(database, "first", "running") is True
    assert job_store.read(database, "first").state == "cancelled"
    job_store.create(database, measurement("second"))  # the hold is free again
    assert [job.id for job in job_store.newest(database, kind="measurement")] == ["second", "first"]
    with pytest.raises(job_store.JobNotFound, match="no measurement job 'nope'"):
        job_store.read(database, "nope", "measurement")
    with pytest.raises(job_store.JobNotFound, match="no simulation job 'first'"):
        job_store.read(database, "first", "simulation")


def test_the_job_of_a_worker_that_stopped_beating_fails_and_frees_what_it_held(database: Database) -> None:
    job_store.create(database, measurement("orphan"))
    with database.writing() as session:
        silent_since = utc_now() - job_store.STALE_AFTER - job_store.STALE_AFTER / 10
        session.exec(update(JobRecord).values(heartbeat_at=silent_since))
    assert job_store.holder(database, "measurement on here") is None
    orphan = job_store.read(database, "orphan")
    assert (orphan.state, orphan.error, orphan.holds) == ("failed", job_store.gone_error("measurement"), None)
    assert job_store.create(database, measurement("next")).host == job_store.server_host()


def test_only_the_last_finished_jobs_of_a_kind_are_kept(database: Database) -> None:
    job_store.create(database, JobRecord(id="other", kind="simulation", plan_id=1, request={}))
    for index in range(job_store.KEPT_FINISHED_JOBS + 3):
        job_store.create(database, measurement(f"job-{index:02}"))
        job_store.finish(database, f"job-{index:02}", "succeeded", {}, result={"run_id": index})
    kept = [job.id for job in job_store.newest(database, 50, kind="measurement")]
    assert kept == [f"job-{index:02}" for index in range(job_store.KEPT_FINISHED_JOBS + 2, 2, -1)]
    assert job_store.read(database, "other").state == "starting"
