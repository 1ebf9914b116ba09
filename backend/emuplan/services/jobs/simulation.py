"""Simulation jobs: ASTRA-sim on a stored plan's Chakra traces in the background (``POST /api/plans/{id}/simulate``,
``api/routes/simulations.py``); the finished simulation's document is the job's result. Simulations hold no host:
one runs at a time per server process, a second start answers 409."""

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from emuplan.errors import EmuplanError
from emuplan.services.jobs.engine import Job, JobContext
from emuplan.services.simulations import check_simulation, plan_traces
from emuplan.simulate.astra_sim import Simulation, SimulationCancelled, SimulatorUnavailable, simulate_plan
from emuplan.simulate.options import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S
from emuplan.store.db import Database
from emuplan.store.tables import JobRecord
from emuplan.workload.chakra.gpus import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS

SimulationState = Literal["starting", "exporting", "simulating", "succeeded", "failed", "cancelled"]


class SimulationNotFinished(EmuplanError):
    """A result asked for before the job succeeded: 409."""

    http_status = 409


class SimulateRequest(BaseModel):
    gpu: Literal[tuple(GPUS)] = Field(default=DEFAULT_GPU, description="GPU whose dense bf16 peak times compute.")
    utilisation: float = Field(default=DEFAULT_UTILISATION, gt=0, le=1, description="Fraction of that peak reached.")
    timeout_s: float = Field(
        default=DEFAULT_TIMEOUT_S,
        gt=0,
        le=MAX_TIMEOUT_S,
        description="Writing the traces and ASTRA-sim are stopped after this wall time.",
    )


class SimulationJobPublic(BaseModel):
    id: str
    plan_id: int
    state: SimulationState
    request: SimulateRequest
    ranks_done: int = Field(description="Ranks whose simulated step has finished.")
    ranks_total: int | None = Field(description="The plan's ranks, once its traces are written.")
    error: str | None
    result: Simulation | None = Field(description="The simulated step per rank, once succeeded.")
    started_at: datetime
    finished_at: datetime | None


class SimulationJob(Job):
    kind = "simulation"
    url_prefix = "/api/simulations"
    initial_progress = {"ranks_done": 0, "ranks_total": None}
    ends_cancelled = (SimulationCancelled,)
    ends_failed = (LookupError, ValueError, SimulatorUnavailable)  # PlanNotFound, ExportError, SimulationError
    at_once = 1

    def __init__(
        self, database: Database, binary: Path | None, memory_limit_bytes: int, plan_id: int, request: SimulateRequest
    ) -> None:
        with database.read_session() as session:  # 404/422/503 before anything is recorded
            self.binary = check_simulation(session, plan_id, binary, memory_limit_bytes)
        self.memory_limit_bytes, self.plan_id, self.request = memory_limit_bytes, plan_id, request

    def record(self) -> JobRecord:
        return JobRecord(plan_id=self.plan_id, request=self.request.model_dump(mode="json"))

    def run(self, database: Database, context: JobContext) -> dict[str, Any]:
        context.report("exporting")
        with database.read_session() as session:
            document, files = plan_traces(session, self.plan_id, self.request.gpu, self.request.utilisation)
        context.report(ranks_total=document.inputs.gpus)
        # "exporting" lasts until the binary runs: the bundle encodes each trace as it is written.
        simulation = simulate_plan(
            self.binary, document, files, self.request.gpu, self.request.utilisation,
            timeout_s=self.request.timeout_s, memory_limit_bytes=self.memory_limit_bytes, cancel=context.cancelled,
            on_started=lambda: context.report("simulating"),
            on_progress=lambda ranks: context.report(ranks_done=ranks),
        )  # fmt: skip
        return simulation.model_dump(mode="json")

    @classmethod
    def public(cls, record: JobRecord) -> SimulationJobPublic:
        return SimulationJobPublic.model_validate({**record.model_dump(), **record.progress})

    @staticmethod
    def result(record: JobRecord) -> Simulation:
        """The simulated step per rank; ``SimulationNotFinished`` until the job has succeeded."""
        if record.result is None:
            raise SimulationNotFinished(
                f"simulation job {record.id} is {record.state}: no result"
                + (f" ({record.error})" if record.error else "")
            )
        return Simulation.model_validate(record.result)
