"""The measurement jobs' records: one active job per host, the cancel flag, a dead worker's job failed
after ``STALE_AFTER`` without a heartbeat, and only the last finished jobs kept."""

import pytest
from sqlmodel import update

from emuplan.store import measurement_jobs as job_store
from emuplan.store.db import Database
from emuplan.store.models import MeasurementJobRecord, utc_now

pytestmark = pytest.mark.both_databases

REQUEST = {"world_size": 2, "backend": "gloo"}


def test_one_active_job_per_host_and_the_cancel_flag_reaches_the_heartbeat(database: Database) -> None:
    job_store.claim_host(database, "first", 1, REQUEST)
    with pytest.raises(job_store.MeasurementBusy) as busy:
        job_store.claim_host(database, "second", 1, REQUEST)
    assert (str(busy.value), busy.value.location) == (
        "a measurement is already running (job first); wait for it or cancel it",
        "/api/measurements/first",
    )
    assert job_store.beat(database, "first", state="running", iterations_done=3) is False
    assert job_store.request_cancel(database, "first").cancel_requested is True
    assert job_store.beat(database, "first", iterations_done=4) is True
    job_store.finish(database, "first", "cancelled", error="the measurement was cancelled")
    finished = job_store.read_job(database, "first")
    assert (finished.state, finished.iterations_done, finished.running_on, finished.error) == (
        "cancelled",
        4,
        None,
        "the measurement was cancelled",
    )
    # A beat after the end changes nothing; a cancel of a finished job leaves it as it is.
    assert job_store.beat(database, "first", state="running") is True
    assert job_store.read_job(database, "first").state == "cancelled"
    job_store.claim_host(database, "second", 1, REQUEST)  # the host is free again
    assert [job.id for job in job_store.list_jobs(database)] == ["second", "first"]
    with pytest.raises(job_store.MeasurementJobNotFound, match="no measurement job 'nope'"):
        job_store.read_job(database, "nope")


def test_the_job_of_a_worker_that_stopped_beating_fails_and_frees_the_host(database: Database) -> None:
    job_store.claim_host(database, "orphan", 1, REQUEST)
    with database.writing() as session:
        silent_since = utc_now() - job_store.STALE_AFTER - job_store.STALE_AFTER / 10
        session.exec(update(MeasurementJobRecord).values(heartbeat_at=silent_since))
    orphan = job_store.read_job(database, "orphan")
    assert (orphan.state, orphan.error, orphan.running_on) == ("failed", job_store.GONE_ERROR, None)
    assert job_store.claim_host(database, "next", 1, REQUEST).running_on == job_store.server_host()


def test_only_the_last_finished_jobs_are_kept(database: Database) -> None:
    for index in range(job_store.KEPT_FINISHED_JOBS + 3):
        job_store.claim_host(database, f"job-{index:02}", 1, REQUEST)
        job_store.finish(database, f"job-{index:02}", "succeeded", run_id=index)
    kept = [job.id for job in job_store.list_jobs(database)]
    assert kept == [f"job-{index:02}" for index in range(job_store.KEPT_FINISHED_JOBS + 2, 2, -1)]
