"""Simulate a plan with ASTRA-sim from the browser or any client: the HTTP face of the simulation jobs
(``api/simulation_jobs.py``). ``POST /api/plans/{id}/simulate`` checks the plan, the options and the setting and
answers 202 with the job at once; ``GET /api/simulations/{job_id}`` reports state and progress and, once it
succeeded, the simulated step per rank; ``GET /api/simulations/{job_id}/result`` that result alone;
``DELETE /api/simulations/{job_id}`` stops ASTRA-sim. Any server worker answers all of them.
"""

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseDep, DatabaseInt, SettingsDep
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.api.simulation_jobs import SimulateRequest, SimulationJobPublic, public, simulation_jobs_of
from emuplan.child_memory import MB
from emuplan.errors import EmuplanError
from emuplan.simulate.astra_sim import Simulation
from emuplan.store import simulation_jobs as job_store

SIMULATION_ERRORS = errors(400, *SIGNED_IN, 404, 409, 422, 503)
router = APIRouter(
    prefix="/api/simulations", tags=["simulations"], dependencies=requires_roles(), responses=SIMULATION_ERRORS
)
plan_router = APIRouter(
    prefix="/api/plans", tags=["simulations"], dependencies=requires_roles(), responses=SIMULATION_ERRORS
)


class SimulationNotFinished(EmuplanError):
    """A result asked for before the job succeeded: 409."""

    http_status = 409


@plan_router.post("/{plan_id}/simulate", status_code=202, response_model=SimulationJobPublic)
def start_simulation(
    plan_id: DatabaseInt,
    body: SimulateRequest,
    request: Request,
    response: Response,
    database: DatabaseDep,
    settings: SettingsDep,
) -> SimulationJobPublic:
    """Simulate one training step of the plan with ASTRA-sim in the background (503 when EMUPLAN_ASTRA_SIM names
    no binary; 422 when its estimated memory passes EMUPLAN_SIMULATOR_MEMORY_MB); poll the returned job."""
    memory_limit = settings.simulator_memory_mb * MB
    job = simulation_jobs_of(request).start(database, settings.astra_sim, memory_limit, plan_id, body)
    response.headers["Location"] = f"/api/simulations/{job.id}"
    return public(job)


@router.get("", response_model=list[SimulationJobPublic])
def list_simulations(
    database: DatabaseDep, plan_id: Annotated[DatabaseInt | None, Query(description="Only this plan's.")] = None
) -> list[SimulationJobPublic]:
    """The last simulations (of one plan, when given), running ones included, newest first."""
    return [public(job) for job in job_store.list_jobs(database, plan_id)]


@router.get("/{job_id}", response_model=SimulationJobPublic)
def get_simulation(job_id: str, database: DatabaseDep) -> SimulationJobPublic:
    return public(job_store.read_job(database, job_id))


@router.get("/{job_id}/result", response_model=Simulation)
def get_simulation_result(job_id: str, database: DatabaseDep) -> Simulation:
    """The simulated step per rank and the plan's communication beside it; 409 until the job has succeeded."""
    job = job_store.read_job(database, job_id)
    if job.result is None:
        raise SimulationNotFinished(
            f"simulation job {job_id} is {job.state}: no result" + (f" ({job.error})" if job.error else "")
        )
    return Simulation.model_validate(job.result)


@router.delete("/{job_id}", response_model=SimulationJobPublic)
def cancel_simulation(job_id: str, request: Request, database: DatabaseDep) -> SimulationJobPublic:
    """Cancel a running simulation, whichever server worker runs it: ASTRA-sim is stopped and no result kept. A
    finished job is returned as it is."""
    return public(simulation_jobs_of(request).cancel(database, job_id))
