"""Every background job, whatever its kind, on one model (``services/jobs/``): ``GET /api/jobs`` lists the newest,
``GET /api/jobs/{job_id}`` reports one (poll it until ``finished_at`` is set), ``DELETE /api/jobs/{job_id}`` cancels
it. Each kind's own URLs (``/api/measurements``, ``/api/simulations``, ``/api/relabel-jobs``) answer with its fields
by name."""

from typing import Annotated

from fastapi import APIRouter, Query

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseDep
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.services.jobs.engine import JobPublic, runner
from emuplan.store import jobs as job_store

router = APIRouter(
    prefix="/api/jobs", tags=["jobs"], dependencies=requires_roles(), responses=errors(*SIGNED_IN, 404, 422)
)


@router.get("", name="list_jobs", response_model=list[JobPublic])
def list_jobs(
    database: DatabaseDep, kind: Annotated[str | None, Query(description="Only this kind's, e.g. simulation.")] = None
) -> list[JobPublic]:
    """The last jobs (of one kind, when given), running ones included, newest first."""
    of_kind = {} if kind is None else {"kind": kind}
    return [JobPublic.of(job) for job in job_store.newest(database, **of_kind)]


@router.get("/{job_id}", name="get_job", response_model=JobPublic)
def get_job(job_id: str, database: DatabaseDep) -> JobPublic:
    return JobPublic.of(job_store.read(database, job_id))


@router.delete("/{job_id}", name="cancel_job", response_model=JobPublic)
def cancel_job(job_id: str, database: DatabaseDep) -> JobPublic:
    """Cancel a running job, whichever server worker runs it. Answers once it has ended (or after 15 s); a finished
    job is returned as it is."""
    return JobPublic.of(runner(database).cancel(database, job_id))
