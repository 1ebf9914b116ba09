"""Relabel jobs' own URLs (``services/jobs/relabel.py``; ``PATCH /api/runs/{id}`` starts them):
``GET /api/relabel-jobs/{job_id}`` reports state and progress; ``DELETE /api/relabel-jobs/{job_id}`` cancels. Any
server worker answers them."""

from typing import Annotated

from fastapi import APIRouter, Query

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseDep, DatabaseInt
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.services.jobs.engine import runner
from emuplan.services.jobs.relabel import RelabelJob, RelabelJobPublic
from emuplan.store import jobs as job_store

router = APIRouter(
    prefix=RelabelJob.url_prefix, tags=["runs"], dependencies=requires_roles(), responses=errors(*SIGNED_IN, 404, 422)
)


@router.get("", name="list_relabel_jobs", response_model=list[RelabelJobPublic])
def list_relabel_jobs(
    database: DatabaseDep, run_id: Annotated[DatabaseInt | None, Query(description="Only this run's.")] = None
) -> list[RelabelJobPublic]:
    """The last relabel jobs (of one run, when given), running ones included, newest first."""
    of_run = {} if run_id is None else {"run_id": run_id}
    return [RelabelJob.public(job) for job in job_store.newest(database, kind=RelabelJob.kind, **of_run)]


@router.get("/{job_id}", name="get_relabel_job", response_model=RelabelJobPublic)
def get_relabel_job(job_id: str, database: DatabaseDep) -> RelabelJobPublic:
    return RelabelJob.public(job_store.read(database, job_id, RelabelJob.kind))


@router.delete("/{job_id}", name="cancel_relabel_job", response_model=RelabelJobPublic)
def cancel_relabel_job(job_id: str, database: DatabaseDep) -> RelabelJobPublic:
    """Cancel a running relabel job, whichever server worker runs it: the run stays as it was. Answers once the
    job has ended (at most ~15 s: DuckDB's summary is not interrupted, the job ends after it); a finished job is
    returned as it is."""
    return RelabelJob.public(runner(database).cancel(database, job_id, RelabelJob.kind))
