"""A stored plan's training step as a Chakra trace bundle; the CLI and the API both call this."""

from pathlib import Path

from sqlmodel import Session

from emuplan.services.model_definitions import inventory_for_spec
from emuplan.store.plans import get_plan, plan_document
from emuplan.store.tables import Plan
from emuplan.workload.chakra.bundle import TraceBundle, bundle_files
from emuplan.workload.chakra.schedule import ComputeModel, build_traces, export_refusal, parse_ranks
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.sources import FILE_SOURCES, resolve_model

WORKLOAD_FORMATS = ("chakra",)
# The ranks option's word for every rank of the plan, past the default's one rank per stage above MAX_ALL_RANKS.
EVERY_RANK = "all"


def _plan_inventory(session: Session, spec: str, allow_files: bool) -> ModelInventory:
    """The plan's model; a config/ONNX/safetensors file the CLI planned from only where files may be read."""
    if allow_files and Path(spec).suffix.lower() in FILE_SOURCES:
        return resolve_model(spec)
    return inventory_for_spec(session, spec)


def wanted_ranks(ranks: str, world_size: int) -> list[int]:
    """``all`` or a list such as '0-7' or '0,4,8-11' → the ranks; more than a bundle holds is refused."""
    return parse_ranks(f"0-{world_size - 1}" if ranks.strip().lower() == EVERY_RANK else ranks, world_size)


def chakra_bundle(
    session: Session,
    plan_id: int,
    gpu: str,
    utilisation: float,
    ranks: str | None = None,
    allow_files: bool = False,
) -> TraceBundle:
    """File name → content: ``workload.<rank>.et`` per rank (each encoded as it is read), the communicator
    groups and README.txt. Raises ExportError before anything is encoded."""
    plan = get_plan(session, plan_id)
    document = plan_document(plan)
    compute = ComputeModel.from_options(gpu, utilisation)
    wanted = wanted_ranks(ranks, document.inputs.gpus) if ranks else None
    inventory = _plan_inventory(session, document.inputs.model, allow_files)
    traces = build_traces(document, inventory, compute, wanted)
    return bundle_files(document, traces, f"saved plan #{plan.id} ({plan.name})")


def chakra_refusal(session: Session, plan: Plan) -> str | None:
    """Why the server cannot export ``plan`` as Chakra traces (what its download would answer), or None."""
    document = plan_document(plan)
    try:
        inventory = inventory_for_spec(session, document.inputs.model)
    except ValueError as error:  # e.g. a config file the CLI planned from, which the server never reads
        return str(error)
    return export_refusal(document, inventory)
