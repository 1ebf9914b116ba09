"""A stored plan simulated with ASTRA-sim: its Chakra traces for every rank (``services.workload_export``) on its own
network (``simulate.astra_sim``). The CLI and the API's jobs both take ``plan_traces`` to ``simulate_plan``; the API
checks a start with ``check_simulation`` first, so a refused one answers at once rather than as a failed job."""

from pathlib import Path

from sqlmodel import Session

from emuplan.services.model_definitions import inventory_for_spec
from emuplan.services.workload_export import EVERY_RANK, chakra_bundle, chakra_refusal
from emuplan.simulate.astra_sim import check_binary
from emuplan.simulate.memory import check_memory
from emuplan.store.plans import get_plan, plan_document
from emuplan.workload.chakra.bundle import TraceBundle
from emuplan.workload.chakra.schedule import MAX_RANKS_PER_BUNDLE, ComputeModel, ExportError, build_traces
from emuplan.workload.document import PlanDocument


def check_simulation(session: Session, plan_id: int, binary: Path | None, memory_limit_bytes: int) -> Path:
    """The binary to run, once the plan and its traces are known to do: ``PlanNotFound``, ``SimulatorUnavailable``,
    ``ExportError`` (the field first) or ``SimulationTooLarge`` (the simulator's estimated memory past
    ``memory_limit_bytes``, from the nodes of every stage: ~0.5 s for 70B on 16,384 ranks) before anything
    starts."""
    plan = get_plan(session, plan_id)
    binary = check_binary(binary)
    if (refusal := chakra_refusal(session, plan)) is not None:
        raise ExportError(refusal)
    if (gpus := plan_document(plan).inputs.gpus) > MAX_RANKS_PER_BUNDLE:
        raise ExportError(
            f"gpus: ASTRA-sim needs a trace for every rank and a bundle holds at most {MAX_RANKS_PER_BUNDLE}; "
            f"the plan has {gpus}"
        )
    document = plan_document(plan)
    # The node counts do not depend on the GPU or its share of peak (they time the nodes).
    traces = build_traces(document, inventory_for_spec(session, document.inputs.model), ComputeModel.from_options())
    check_memory(traces, memory_limit_bytes)
    return binary


def plan_traces(
    session: Session, plan_id: int, gpu: str, utilisation: float, allow_files: bool = False
) -> tuple[PlanDocument, TraceBundle]:
    """The plan's document and its Chakra bundle with a trace for every rank, as a simulator needs (each trace
    encoded as it is read)."""
    document = plan_document(get_plan(session, plan_id))
    return document, chakra_bundle(session, plan_id, gpu, utilisation, EVERY_RANK, allow_files=allow_files)
