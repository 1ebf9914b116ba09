"""Measure a plan from the browser: the HTTP face of the measurement jobs (``services/jobs/measurement.py``).

``POST /api/plans/{id}/measure`` checks the options, starts the job on a thread and answers 202 at once;
``GET /api/measurements/{job_id}`` reports state and progress and, when done, the new run's id;
``DELETE /api/measurements/{job_id}`` cancels (the workers are killed). Any server worker answers all
three. A second start on a server host while a job runs there answers 409 with the running job as
``Location``.
"""

from fastapi import APIRouter, Response

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseDep, DatabaseInt, SettingsDep
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.services.jobs.engine import runner
from emuplan.services.jobs.measurement import MeasurementJob, MeasurementJobPublic, MeasureRequest
from emuplan.store import jobs as job_store

# A job of another server host is 404 only once it is gone; a second start on a busy host is 409.
MEASUREMENT_ERRORS = errors(400, *SIGNED_IN, 404, 409, 422)
router = APIRouter(
    prefix=MeasurementJob.url_prefix, tags=["measurements"], dependencies=requires_roles(), responses=MEASUREMENT_ERRORS
)
plan_router = APIRouter(
    prefix="/api/plans", tags=["measurements"], dependencies=requires_roles(), responses=MEASUREMENT_ERRORS
)


@plan_router.post("/{plan_id}/measure", name="start_measurement", status_code=202, response_model=MeasurementJobPublic)
def start_measurement(
    plan_id: DatabaseInt, body: MeasureRequest, response: Response, database: DatabaseDep, settings: SettingsDep
) -> MeasurementJobPublic:
    """Start measuring the plan on local processes in the background, each under EMUPLAN_MEASURE_MEMORY_MB; poll
    the returned job."""
    job = MeasurementJob(database, plan_id, body, settings.measure_memory_mb)
    record = runner(database).start(database, job)
    response.headers["Location"] = MeasurementJob.url(record.id)
    return MeasurementJob.public(record)


@router.get("", name="list_measurements", response_model=list[MeasurementJobPublic])
def list_measurements(database: DatabaseDep) -> list[MeasurementJobPublic]:
    """The running measurements (one per server host at most) and the last finished ones, newest first."""
    jobs = job_store.newest(database, job_store.KEPT_FINISHED_JOBS + 1, kind=MeasurementJob.kind)
    return [MeasurementJob.public(job) for job in jobs]


@router.get("/{job_id}", name="get_measurement", response_model=MeasurementJobPublic)
def get_measurement(job_id: str, database: DatabaseDep) -> MeasurementJobPublic:
    return MeasurementJob.public(job_store.read(database, job_id, MeasurementJob.kind))


@router.delete("/{job_id}", name="cancel_measurement", response_model=MeasurementJobPublic)
def cancel_measurement(job_id: str, database: DatabaseDep) -> MeasurementJobPublic:
    """Cancel a running measurement, whichever server worker runs it: its processes are killed and no run
    is stored. A finished job is returned as it is."""
    return MeasurementJob.public(runner(database).cancel(database, job_id, MeasurementJob.kind))
