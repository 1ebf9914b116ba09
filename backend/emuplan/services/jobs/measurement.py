"""Measurement jobs: a stored plan measured on local processes and stored as a run, in the background
(``POST /api/plans/{id}/measure``, ``api/routes/measurements.py``).

One measurement at a time per server host: a job holds its host while active (``store.jobs``' ``holds``), so a
second start on the same host fails at the insert, atomically, on SQLite and PostgreSQL alike. A row was chosen
over a PostgreSQL advisory lock because it works on both databases, needs no connection held open for the whole
measurement, and tells every worker which job holds the host. The job's thread itself starts the measuring
processes, so they die with it (``PR_SET_PDEATHSIG``) if the server goes away; a cancel kills them.
"""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

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
from emuplan.services.jobs.engine import Job, JobContext
from emuplan.services.measurements import local_launcher, store_measurement
from emuplan.services.runs import stated_field
from emuplan.store.db import Database
from emuplan.store.jobs import server_host
from emuplan.store.plans import PlanNotFound
from emuplan.store.tables import JobRecord

MeasurementState = Literal["starting", "running", "storing", "succeeded", "failed", "cancelled"]


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
    name: str | None = stated_field("name", given="Default: the plan and set-up.")

    def options(self, memory_mb: int) -> MeasurementOptions:
        """The options asked for, each worker under ``memory_mb`` (EMUPLAN_MEASURE_MEMORY_MB)."""
        return MeasurementOptions(**self.model_dump(exclude={"name"}), memory_mb=memory_mb)


class MeasurementJobPublic(BaseModel):
    id: str
    plan_id: int
    state: MeasurementState
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


class MeasurementJob(Job):
    kind = "measurement"
    url_prefix = "/api/measurements"
    initial_progress = {"iterations_done": 0, "iterations_total": None, "warmup": False}
    ends_cancelled = (MeasurementCancelled,)
    ends_failed = (MeasurementError, PlanNotFound)

    def __init__(self, database: Database, plan_id: int, request: MeasureRequest, memory_mb: int) -> None:
        self.plan_id, self.request = plan_id, request
        self.launcher: LocalLauncher = local_launcher(database, plan_id, request.options(memory_mb))  # 404/422 first

    def record(self) -> JobRecord:
        return JobRecord(
            plan_id=self.plan_id, request=self.request.model_dump(mode="json"), holds=f"measurement on {server_host()}"
        )

    def run(self, database: Database, context: JobContext) -> dict[str, Any]:
        def on_event(event: dict[str, Any]) -> None:
            kind = event.get("event")
            if kind == "started":
                total = event["warmup"] + event["iterations"]
                context.report("running", iterations_total=total, warmup=event["warmup"] > 0)
            elif kind == "iteration":
                context.report(iterations_done=event["done"], warmup=event["done"] < self.request.warmup)
            elif kind == "finished":
                context.report("storing")

        self.launcher.on_event = on_event
        [result] = self.launcher.run()
        run = store_measurement(database, self.plan_id, result, name=self.request.name)
        return {"run_id": run.id}

    def cancel(self) -> None:
        self.launcher.cancel()  # its processes killed at once

    @classmethod
    def public(cls, record: JobRecord) -> MeasurementJobPublic:
        request = MeasureRequest.model_validate(record.request)
        return MeasurementJobPublic(
            **record.model_dump(include={"id", "plan_id", "state", "error", "started_at", "finished_at"}),
            **record.progress,
            run_id=(record.result or {}).get("run_id"),
            world_size=request.world_size,
            backend=request.backend,
            scheduling=request.scheduling,
        )
