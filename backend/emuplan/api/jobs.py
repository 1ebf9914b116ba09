"""The app's measurement jobs: a measurement of a stored plan on local processes, run on a background
thread of the worker that started it, followed and cancelled by id from any worker. ``api/measure.py``
is their HTTP face; their state and progress live in the database (``store/measurement_jobs.py``), one
active job per server host.

The job thread itself starts the measuring processes, so they die with it (``PR_SET_PDEATHSIG``) if the
server goes away. Beside it a heartbeat thread writes the progress every ``HEARTBEAT_S`` and reads the
cancel flag, so a cancel sent to another worker reaches the processes within that time.
"""

import secrets
import threading
from datetime import datetime
from functools import partial
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, Field

from emuplan.api.deps import app_registry
from emuplan.api.job_threads import JobProgress, heartbeat
from emuplan.measure.launcher import LocalLauncher, MeasurementCancelled
from emuplan.measure.options import (
    BACKENDS,
    DEFAULT_BACKEND,
    MAX_ITERATIONS,
    MAX_LOCAL_WORLD_SIZE,
    MAX_TIMEOUT_S,
    MAX_WARMUP,
    MeasurementOptions,
    TimingScheduling,
    WorkloadSource,
)
from emuplan.measure.workload import MeasurementError
from emuplan.services.measurements import local_launcher, store_measurement
from emuplan.store import measurement_jobs as job_store
from emuplan.store.db import Database
from emuplan.store.models import MeasurementJobRecord
from emuplan.store.plans import PlanNotFound

JobState = Literal["starting", "running", "storing", "succeeded", "failed", "cancelled"]


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
    iterations: int | None = Field(
        default=None, ge=1, le=MAX_ITERATIONS, description="Measured iterations. Default: the plan's trials."
    )
    warmup: int = Field(
        default=MeasurementOptions.warmup,
        ge=0,
        le=MAX_WARMUP,
        description="Warm-up iterations, run first and not stored.",
    )
    workload: WorkloadSource = Field(default=WorkloadSource.KCCB, description="kccb data sizes or every collective.")
    timeout_s: float = Field(
        default=MeasurementOptions.timeout_s,
        gt=0,
        le=MAX_TIMEOUT_S,
        description="A hung measurement is killed after this.",
    )
    scheduling: TimingScheduling = Field(
        default=TimingScheduling.REALTIME,
        description="realtime: the timing threads at SCHED_FIFO where allowed; normal: the default scheduler.",
    )
    name: str | None = Field(default=None, max_length=200, description="Run name. Default: plan and set-up.")

    def options(self, memory_mb: int) -> MeasurementOptions:
        """The options asked for, each worker under ``memory_mb`` (EMUPLAN_MEASURE_MEMORY_MB)."""
        return MeasurementOptions(**self.model_dump(exclude={"name"}), memory_mb=memory_mb)


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


def public(record: MeasurementJobRecord) -> MeasurementJobPublic:
    request = MeasureRequest.model_validate(record.request)
    return MeasurementJobPublic(
        **record.model_dump(include=set(MeasurementJobPublic.model_fields) - {"world_size", "backend", "scheduling"}),
        world_size=request.world_size,
        backend=request.backend,
        scheduling=request.scheduling,
    )


class _Progress(JobProgress):
    """What the launcher last reported (``on_event``), written to the database with each heartbeat."""

    def __init__(self, warmup: int) -> None:
        super().__init__()
        self.warmup_iterations = warmup

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "started":
            total = event["warmup"] + event["iterations"]
            self.update(state="running", iterations_total=total, warmup=event["warmup"] > 0)
        elif kind == "iteration":
            self.update(iterations_done=event["done"], warmup=event["done"] < self.warmup_iterations)
        elif kind == "finished":
            self.update(state="storing")


class MeasurementJobs:
    """This worker's part of the measurement jobs: the launchers it runs (kept for the last few jobs, so
    their processes can be checked), over the shared records in the database."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._launchers: dict[str, LocalLauncher] = {}

    def start(self, database: Database, plan_id: int, request: MeasureRequest, memory_mb: int) -> MeasurementJobRecord:
        launcher = local_launcher(database, plan_id, request.options(memory_mb))  # 404/422 before anything is recorded
        job_id = secrets.token_hex(8)
        record = job_store.claim_host(database, job_id, plan_id, request.model_dump(mode="json"))
        progress = _Progress(request.warmup)
        launcher.on_event = progress.on_event
        with self._lock:
            self._launchers[job_id] = launcher
            for old in list(self._launchers)[: max(0, len(self._launchers) - job_store.KEPT_FINISHED_JOBS)]:
                del self._launchers[old]
        done = threading.Event()
        args = (database, job_id, plan_id, request.name, launcher, progress, done)
        threading.Thread(target=self._run, args=args, daemon=True, name=f"measure-{job_id}").start()
        heartbeat_args = (partial(job_store.beat, database), job_id, progress, launcher.cancel, done)
        threading.Thread(target=heartbeat, args=heartbeat_args, daemon=True, name=f"beat-{job_id}").start()
        return record

    @staticmethod
    def _run(
        database: Database,
        job_id: str,
        plan_id: int,
        name: str | None,
        launcher: LocalLauncher,
        progress: _Progress,
        done: threading.Event,
    ) -> None:
        try:
            [result] = launcher.run()
            run = store_measurement(database, plan_id, result, name=name)
        except MeasurementCancelled as error:
            outcome = {"state": "cancelled", "error": str(error)}
        except (MeasurementError, PlanNotFound) as error:
            outcome = {"state": "failed", "error": str(error)}
        except Exception as error:  # noqa: BLE001 - a job thread must always end in a final state
            outcome = {"state": "failed", "error": f"unexpected error: {error!r}"}
        else:
            outcome = {"state": "succeeded", "run_id": run.id}
        finally:
            done.set()
        last = {key: value for key, value in progress.snapshot().items() if key != "state"}
        job_store.finish(database, job_id, **last, **outcome)

    def launcher(self, job_id: str) -> LocalLauncher:
        """The launcher of a job this worker ran (tests check its processes are gone)."""
        return self._launchers[job_id]

    def get(self, database: Database, job_id: str) -> MeasurementJobRecord:
        return job_store.read_job(database, job_id)

    def cancel(self, database: Database, job_id: str) -> MeasurementJobRecord:
        """Cancel a running job, whichever worker runs it: its processes are killed and no run is stored.
        Answers once the job has ended (or after ``job_records.CANCEL_WAIT_S``); a finished job stays as it is."""
        job = job_store.request_cancel(database, job_id)
        launcher = self._launchers.get(job_id)
        if launcher is not None:
            launcher.cancel()
        return job_store.wait_while_active(database, job)

    def all(self, database: Database) -> list[MeasurementJobRecord]:
        return job_store.list_jobs(database)


def jobs_of(request: Request) -> MeasurementJobs:
    """The app's job registry, created on first use (requests run on several threads)."""
    return app_registry(request, "measurement_jobs", MeasurementJobs)
