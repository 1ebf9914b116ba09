"""Measure a plan from the browser: a background job on local processes, one at a time, cancellable.

``POST /api/plans/{id}/measure`` checks the options, starts the job on a thread and answers 202 at once;
``GET /api/measurements/{job_id}`` reports state and progress and, when done, the new run's id;
``DELETE /api/measurements/{job_id}`` cancels (the workers are killed). A second start while one job
runs answers 409 with the running job as ``Location``. The job thread itself starts the workers, so
they die with it (``PR_SET_PDEATHSIG``) if the server goes away.
"""

import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from pydantic import BaseModel, Field

from emuplan.api.deps import DatabaseDep, DatabaseInt
from emuplan.measure.launcher import BACKENDS, LocalLauncher, MeasurementCancelled, MeasurementOptions
from emuplan.measure.workload import MeasurementError, TimingScheduling, WorkloadSource
from emuplan.store.db import Database
from emuplan.store.measurements import local_launcher, store_measurement
from emuplan.store.plans import PlanNotFound

router = APIRouter(tags=["measurements"])

JobState = Literal["starting", "running", "storing", "succeeded", "failed", "cancelled"]
ACTIVE_STATES = ("starting", "running", "storing")
KEPT_FINISHED_JOBS = 20
CANCEL_WAIT_S = 15.0


class MeasureRequest(BaseModel):
    world_size: int = Field(default=4, ge=1, le=64, description="Local processes, one rank each.")
    backend: Literal[BACKENDS] = Field(default="auto", description="auto: nccl when CUDA is available, else gloo.")
    iterations: int | None = Field(default=None, ge=1, description="Measured iterations. Default: the plan's trials.")
    warmup: int = Field(default=2, ge=0, description="Warm-up iterations, run first and not stored.")
    workload: WorkloadSource = Field(default=WorkloadSource.KCCB, description="kccb data sizes or every collective.")
    timeout_s: float = Field(default=600.0, gt=0, le=3600, description="A hung measurement is killed after this.")
    scheduling: TimingScheduling = Field(
        default=TimingScheduling.REALTIME,
        description="realtime: the timing threads at SCHED_FIFO where allowed; normal: the default scheduler.",
    )
    name: str | None = Field(default=None, max_length=200, description="Run name. Default: plan and set-up.")

    def options(self) -> MeasurementOptions:
        return MeasurementOptions(**self.model_dump(exclude={"name"}))


class MeasurementJobPublic(BaseModel):
    id: str
    plan_id: int
    state: JobState
    world_size: int
    backend: str
    scheduling: TimingScheduling
    iterations_done: int = Field(description="Iterations finished, warm-up included.")
    iterations_total: int | None = Field(description="Warm-up + measured iterations, once the workers are up.")
    warmup: bool = Field(description="Whether the iteration now running is a warm-up one.")
    error: str | None
    run_id: int | None
    started_at: datetime
    finished_at: datetime | None


@dataclass
class MeasurementJob:
    id: str
    plan_id: int
    request: MeasureRequest
    launcher: LocalLauncher
    state: JobState = "starting"
    iterations_done: int = 0
    iterations_total: int | None = None
    warmup: bool = False
    error: str | None = None
    run_id: int | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    thread: threading.Thread | None = None

    @property
    def world_size(self) -> int:
        return self.request.world_size

    @property
    def backend(self) -> str:
        return self.request.backend

    @property
    def scheduling(self) -> TimingScheduling:
        return self.request.scheduling

    def public(self) -> MeasurementJobPublic:
        return MeasurementJobPublic.model_validate(self, from_attributes=True)

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "started":
            self.state = "running"
            self.iterations_total = event["warmup"] + event["iterations"]
            self.warmup = event["warmup"] > 0
        elif kind == "iteration":
            self.iterations_done = event["done"]
            self.warmup = event["done"] < self.request.warmup
        elif kind == "finished":
            self.state = "storing"

    def finish(self, state: JobState, error: str | None = None, run_id: int | None = None) -> None:
        self.error, self.run_id = error, run_id
        self.finished_at = datetime.now(UTC)
        self.state = state


class MeasurementJobs:
    """The app's measurement jobs: at most one active, the last few finished ones kept for their status."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, MeasurementJob] = {}

    def active(self) -> MeasurementJob | None:
        return next((job for job in self._jobs.values() if job.state in ACTIVE_STATES), None)

    def start(self, database: Database, plan_id: int, request: MeasureRequest) -> MeasurementJob:
        with self._lock:
            running = self.active()
            if running is not None:
                raise HTTPException(
                    409,
                    detail=f"a measurement is already running (job {running.id}); wait for it or cancel it",
                    headers={"Location": f"/api/measurements/{running.id}"},
                )
            launcher = local_launcher(database, plan_id, request.options())
            job = MeasurementJob(id=secrets.token_hex(8), plan_id=plan_id, request=request, launcher=launcher)
            launcher.on_event = job.on_event
            self._forget_old_jobs()
            self._jobs[job.id] = job
            job.thread = threading.Thread(target=self._run, args=(database, job), daemon=True, name=f"measure-{job.id}")
            job.thread.start()
        return job

    def _run(self, database: Database, job: MeasurementJob) -> None:
        try:
            [result] = job.launcher.run()
            run = store_measurement(database, job.plan_id, result, name=job.request.name)
        except MeasurementCancelled as error:
            job.finish("cancelled", str(error))
        except (MeasurementError, PlanNotFound) as error:
            job.finish("failed", str(error))
        except Exception as error:  # noqa: BLE001 - a job thread must always end in a final state
            job.finish("failed", f"unexpected error: {error!r}")
        else:
            job.finish("succeeded", run_id=run.id)

    def _forget_old_jobs(self) -> None:
        finished = [job_id for job_id, job in self._jobs.items() if job.state not in ACTIVE_STATES]
        for job_id in finished[: max(0, len(finished) - KEPT_FINISHED_JOBS + 1)]:
            del self._jobs[job_id]

    def get(self, job_id: str) -> MeasurementJob:
        job = self._jobs.get(job_id)
        if job is None:
            raise HTTPException(404, detail=f"no measurement job {job_id!r}")
        return job

    def all(self) -> list[MeasurementJob]:
        return sorted(self._jobs.values(), key=lambda job: job.started_at, reverse=True)


_JOBS_CREATION_LOCK = threading.Lock()


def jobs_of(request: Request) -> MeasurementJobs:
    """The app's job registry, created on first use (requests run on several threads)."""
    state = request.app.state
    with _JOBS_CREATION_LOCK:
        if not hasattr(state, "measurement_jobs"):
            state.measurement_jobs = MeasurementJobs()
    return state.measurement_jobs


@router.post("/api/plans/{plan_id}/measure", status_code=202, response_model=MeasurementJobPublic)
def start_measurement(
    plan_id: DatabaseInt, body: MeasureRequest, request: Request, response: Response, database: DatabaseDep
) -> MeasurementJobPublic:
    """Start measuring the plan on local processes in the background; poll the returned job."""
    try:
        job = jobs_of(request).start(database, plan_id, body)
    except PlanNotFound as error:
        raise HTTPException(404, detail=str(error)) from None
    except MeasurementError as error:
        raise HTTPException(422, detail=str(error)) from None
    response.headers["Location"] = f"/api/measurements/{job.id}"
    return job.public()


@router.get("/api/measurements", response_model=list[MeasurementJobPublic])
def list_measurements(request: Request) -> list[MeasurementJobPublic]:
    """The running measurement (if any) and the last finished ones, newest first."""
    return [job.public() for job in jobs_of(request).all()]


@router.get("/api/measurements/{job_id}", response_model=MeasurementJobPublic)
def get_measurement(job_id: str, request: Request) -> MeasurementJobPublic:
    return jobs_of(request).get(job_id).public()


@router.delete("/api/measurements/{job_id}", response_model=MeasurementJobPublic)
def cancel_measurement(job_id: str, request: Request) -> MeasurementJobPublic:
    """Cancel a running measurement: its workers are killed and no run is stored. A finished job is
    returned as it is."""
    job = jobs_of(request).get(job_id)
    if job.state in ACTIVE_STATES:
        job.launcher.cancel()
        if job.thread is not None:
            job.thread.join(CANCEL_WAIT_S)
    return job.public()
