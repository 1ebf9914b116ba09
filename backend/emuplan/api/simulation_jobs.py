"""The app's simulation jobs: ASTRA-sim on a stored plan's Chakra traces, run on a background thread of the worker
that started it, followed and cancelled by id from any worker (state in ``store/simulation_jobs.py``);
``api/simulate.py`` is their HTTP face. As with measurements (``api/jobs.py``), a heartbeat thread writes the
progress every ``HEARTBEAT_S`` and reads the cancel flag, so a cancel sent to another worker stops the binary
within that time. One simulation runs at a time per server process: a second start answers 409.
"""

import secrets
import threading
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Literal

from fastapi import Request
from pydantic import BaseModel, Field

from emuplan.api.deps import app_registry
from emuplan.api.job_threads import JobProgress, heartbeat
from emuplan.errors import EmuplanError
from emuplan.simulate.astra_sim import Simulation, SimulationCancelled, SimulatorUnavailable, simulate_plan
from emuplan.simulate.options import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S
from emuplan.store import simulation_jobs as job_store
from emuplan.store.db import Database
from emuplan.store.models import SimulationJobRecord
from emuplan.store.simulations import check_simulation, plan_traces
from emuplan.workload.chakra.gpus import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS

SimulationState = Literal["starting", "exporting", "simulating", "succeeded", "failed", "cancelled"]


class SimulationBusy(EmuplanError):
    """A second simulation on a server process while one runs there: 409."""

    http_status = 409

    def __init__(self) -> None:
        super().__init__("a simulation is already running on this server; wait for it or cancel it")


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


def public(record: SimulationJobRecord) -> SimulationJobPublic:
    return SimulationJobPublic.model_validate(record, from_attributes=True)


class SimulationJobs:
    """This worker's simulations over the shared records in the database."""

    def __init__(self) -> None:
        self._running = threading.Semaphore(1)

    def start(
        self, database: Database, binary: Path | None, memory_limit_bytes: int, plan_id: int, request: SimulateRequest
    ) -> SimulationJobRecord:
        with database.read_session() as session:  # 404/422/503 before anything is recorded
            binary = check_simulation(session, plan_id, binary, memory_limit_bytes)
        if not self._running.acquire(blocking=False):
            raise SimulationBusy()
        try:
            job_id = secrets.token_hex(8)
            record = job_store.create_job(database, job_id, plan_id, request.model_dump(mode="json"))
            progress, cancel, done = JobProgress(), threading.Event(), threading.Event()
            args = (database, binary, memory_limit_bytes, job_id, plan_id, request, progress, cancel, done)
            threading.Thread(target=self._run, args=args, daemon=True, name=f"simulate-{job_id}").start()
        except BaseException:
            self._running.release()
            raise
        beat = partial(job_store.beat, database)
        heartbeat_args = (beat, job_id, progress, cancel.set, done)
        threading.Thread(target=heartbeat, args=heartbeat_args, daemon=True, name=f"beat-{job_id}").start()
        return record

    def _run(
        self,
        database: Database,
        binary: Path,
        memory_limit_bytes: int,
        job_id: str,
        plan_id: int,
        request: SimulateRequest,
        progress: JobProgress,
        cancel: threading.Event,
        done: threading.Event,
    ) -> None:
        try:
            progress.update(state="exporting")
            with database.read_session() as session:
                document, files = plan_traces(session, plan_id, request.gpu, request.utilisation)
            progress.update(ranks_total=document.inputs.gpus)
            # "exporting" lasts until the binary runs: the bundle encodes each trace as it is written.
            simulation = simulate_plan(
                binary, document, files, request.gpu, request.utilisation, timeout_s=request.timeout_s,
                memory_limit_bytes=memory_limit_bytes, cancel=cancel,
                on_started=lambda: progress.update(state="simulating"),
                on_progress=lambda ranks: progress.update(ranks_done=ranks),
            )  # fmt: skip
        except SimulationCancelled as error:
            outcome = {"state": "cancelled", "error": str(error)}
        except (LookupError, ValueError, SimulatorUnavailable) as error:  # PlanNotFound, ExportError, SimulationError
            outcome = {"state": "failed", "error": str(error)}
        except Exception as error:  # noqa: BLE001 - a job thread must always end in a final state
            outcome = {"state": "failed", "error": f"unexpected error: {error!r}"}
        else:
            outcome = {"state": "succeeded", "result": simulation.model_dump(mode="json")}
        finally:
            done.set()
            progress.state_changed.set()
            self._running.release()
        last = {key: value for key, value in progress.snapshot().items() if key != "state"}
        job_store.finish(database, job_id, **last, **outcome)

    def cancel(self, database: Database, job_id: str) -> SimulationJobRecord:
        """Cancel a running job, whichever worker runs it: ASTRA-sim is stopped and no result kept. Answers once
        the job has ended (or after ``job_records.CANCEL_WAIT_S``); a finished job stays as it is."""
        job = job_store.request_cancel(database, job_id)
        return job_store.wait_while_active(database, job)


def simulation_jobs_of(request: Request) -> SimulationJobs:
    """The app's simulation registry, created on first use (requests run on several threads)."""
    return app_registry(request, "simulation_jobs", SimulationJobs)
