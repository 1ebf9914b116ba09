"""The app's measurement jobs: a measurement of a stored plan on local processes, run on a background
thread, one at a time, followed and cancelled by id. ``api/measure.py`` is their HTTP face.

The job thread itself starts the workers, so they die with it (``PR_SET_PDEATHSIG``) if the server
goes away.
"""

import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, Field

from emuplan.measure.launcher import (
    BACKENDS,
    DEFAULT_BACKEND,
    MAX_LOCAL_WORLD_SIZE,
    LocalLauncher,
    MeasurementCancelled,
    MeasurementOptions,
)
from emuplan.measure.workload import MeasurementError, TimingScheduling, WorkloadSource
from emuplan.store.db import Database
from emuplan.store.measurements import local_launcher, store_measurement
from emuplan.store.plans import PlanNotFound
from emuplan.store.rows import NotFound


class MeasurementJobNotFound(NotFound):
    pass


class MeasurementBusy(Exception):
    """A second measurement while one runs: 409, with the running job as ``Location``."""

    def __init__(self, running_job_id: str):
        super().__init__(f"a measurement is already running (job {running_job_id}); wait for it or cancel it")
        self.location = f"/api/measurements/{running_job_id}"


JobState = Literal["starting", "running", "storing", "succeeded", "failed", "cancelled"]
ACTIVE_STATES = ("starting", "running", "storing")
KEPT_FINISHED_JOBS = 20
CANCEL_WAIT_S = 15.0


class MeasureRequest(BaseModel):
    world_size: int = Field(
        default=MeasurementOptions.world_size,
        ge=1,
        le=MAX_LOCAL_WORLD_SIZE,
        description="Local processes, one rank each.",
    )
    backend: Literal[BACKENDS] = Field(
        default=DEFAULT_BACKEND, description="auto: nccl when CUDA is available, else gloo."
    )
    iterations: int | None = Field(default=None, ge=1, description="Measured iterations. Default: the plan's trials.")
    warmup: int = Field(
        default=MeasurementOptions.warmup, ge=0, description="Warm-up iterations, run first and not stored."
    )
    workload: WorkloadSource = Field(default=WorkloadSource.KCCB, description="kccb data sizes or every collective.")
    timeout_s: float = Field(
        default=MeasurementOptions.timeout_s, gt=0, le=3600, description="A hung measurement is killed after this."
    )
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
                raise MeasurementBusy(running.id)
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
            raise MeasurementJobNotFound(f"no measurement job {job_id!r}")
        return job

    def cancel(self, job_id: str) -> MeasurementJob:
        """Kill a running job's workers (no run is stored); a finished job stays as it is."""
        job = self.get(job_id)
        if job.state in ACTIVE_STATES:
            job.launcher.cancel()
            if job.thread is not None:
                job.thread.join(CANCEL_WAIT_S)
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
