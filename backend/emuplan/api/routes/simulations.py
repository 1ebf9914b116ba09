"""Simulate a plan with ASTRA-sim from the browser or any client: the HTTP face of the simulation jobs
(``services/jobs/simulation.py``). ``POST /api/plans/{id}/simulate`` checks the plan, the options and the setting
and answers 202 with the job at once; ``GET /api/simulations/{job_id}`` reports state and progress and, once it
succeeded, the simulated step per rank; ``GET /api/simulations/{job_id}/result`` that result alone;
``DELETE /api/simulations/{job_id}`` stops ASTRA-sim. Any server worker answers all of them.
"""

from typing import Annotated

from fastapi import APIRouter, Query, Response

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseDep, DatabaseInt, SettingsDep
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.child_memory import MB
from emuplan.services.jobs.engine import runner
from emuplan.services.jobs.simulation import SimulateRequest, SimulationJob, SimulationJobPublic
from emuplan.simulate.astra_sim import Simulation
from emuplan.store import jobs as job_store

SIMULATION_ERRORS = errors(400, *SIGNED_IN, 404, 409, 422, 503)
router = APIRouter(
    prefix=SimulationJob.url_prefix, tags=["simulations"], dependencies=requires_roles(), responses=SIMULATION_ERRORS
)
plan_router = APIRouter(
    prefix="/api/plans", tags=["simulations"], dependencies=requires_roles(), responses=SIMULATION_ERRORS
)


@plan_router.post("/{plan_id}/simulate", name="start_simulation", status_code=202, response_model=SimulationJobPublic)
def start_simulation(
    plan_id: DatabaseInt, body: SimulateRequest, response: Response, database: DatabaseDep, settings: SettingsDep
) -> SimulationJobPublic:
    """Simulate one training step of the plan with ASTRA-sim in the background (503 when EMUPLAN_ASTRA_SIM names
    no binary; 422 when its estimated memory passes EMUPLAN_SIMULATOR_MEMORY_MB); poll the returned job."""
    job = SimulationJob(database, settings.astra_sim, settings.simulator_memory_mb * MB, plan_id, body)
    record = runner(database).start(database, job)
    response.headers["Location"] = SimulationJob.url(record.id)
    return SimulationJob.public(record)


@router.get("", name="list_simulations", response_model=list[SimulationJobPublic])
def list_simulations(
    database: DatabaseDep, plan_id: Annotated[DatabaseInt | None, Query(description="Only this plan's.")] = None
) -> list[SimulationJobPublic]:
    """The last simulations (of one plan, when given), running ones included, newest first."""
    of_plan = {} if plan_id is None else {"plan_id": plan_id}
    return [SimulationJob.public(job) for job in job_store.newest(database, kind=SimulationJob.kind, **of_plan)]


@router.get("/{job_id}", name="get_simulation", response_model=SimulationJobPublic)
def get_simulation(job_id: str, database: DatabaseDep) -> SimulationJobPublic:
    return SimulationJob.public(job_store.read(database, job_id, SimulationJob.kind))


@router.get("/{job_id}/result", name="get_simulation_result", response_model=Simulation)
def get_simulation_result(job_id: str, database: DatabaseDep) -> Simulation:
    """The simulated step per rank and the plan's communication beside it; 409 until the job has succeeded."""
    return SimulationJob.result(job_store.read(database, job_id, SimulationJob.kind))


@router.delete("/{job_id}", name="cancel_simulation", response_model=SimulationJobPublic)
def cancel_simulation(job_id: str, database: DatabaseDep) -> SimulationJobPublic:
    """Cancel a running simulation, whichever server worker runs it: ASTRA-sim is stopped and no result kept. A
    finished job is returned as it is."""
    return SimulationJob.public(runner(database).cancel(database, job_id, SimulationJob.kind))
