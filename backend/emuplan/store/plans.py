"""Stored plans: compute with ``plan_workload`` and keep inputs and document in one row.

The API and the CLI both call these functions. A model is named by a preset name or, for an
uploaded model definition, ``model:<id>`` (its stored inventory is planned, no file is read).
"""

from sqlmodel import Session

from emuplan.sandbox.runner import SandboxPolicy
from emuplan.store.models import ModelDefinition, Plan
from emuplan.store.rows import get_row, newest_first
from emuplan.workload.document import PlanDocument, PlanRequest
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.planner import plan_workload
from emuplan.workload.pytorch_source import PytorchSourceOptions, capture_for_plan
from emuplan.workload.sources import UnknownModelError, resolve_model

STORED_MODEL_PREFIX = "model:"


class PlanNotFound(LookupError):
    pass


def stored_model_spec(model_definition_id: int) -> str:
    return f"{STORED_MODEL_PREFIX}{model_definition_id}"


def inventory_for_spec(session: Session, spec: str) -> tuple[ModelInventory, int | None]:
    """A preset, or an uploaded model definition as ``model:<id>``; never a server-side file path."""
    if not spec.startswith(STORED_MODEL_PREFIX):
        return resolve_model(spec, allow_files=False), None
    raw_id = spec.removeprefix(STORED_MODEL_PREFIX)
    definition = session.get(ModelDefinition, int(raw_id)) if raw_id.isdigit() else None
    if definition is None:
        raise UnknownModelError(f"model: no uploaded model definition {spec!r}")
    return ModelInventory.model_validate(definition.inventory), definition.id


def plan_for_request(
    session: Session, request: PlanRequest, sandbox: SandboxPolicy | None = None
) -> tuple[PlanDocument, int | None]:
    """The plan document and the uploaded model's id. With ``sandbox``, an uploaded PyTorch source
    also gets the collectives PyTorch itself issues (``captured``), run in the sandbox."""
    inventory, model_definition_id = inventory_for_spec(session, request.model)
    document = plan_workload(request, inventory)
    if sandbox is None or model_definition_id is None:
        return document, model_definition_id
    definition = session.get(ModelDefinition, model_definition_id)
    if definition.source_kind == "pytorch" and definition.content is not None:
        document = capture_for_plan(
            document,
            definition.content.decode("utf-8"),
            definition.file_name or "model.py",
            PytorchSourceOptions.model_validate(definition.options),
            sandbox,
        )
    return document, model_definition_id


def preview_plan(session: Session, request: PlanRequest, sandbox: SandboxPolicy | None = None) -> PlanDocument:
    return plan_for_request(session, request, sandbox)[0]


def save_document(
    session: Session,
    document: PlanDocument,
    request: PlanRequest,
    name: str | None = None,
    model_definition_id: int | None = None,
) -> Plan:
    """Adds the plan to the session; the caller's transaction commits it. The request is kept as
    given (the fields set), so an edit starts from what the user chose."""
    plan = Plan(
        name=name or f"{document.model.name} {document.strategy.value} ({document.mode.value})",
        model_name=document.model.name,
        model_definition_id=model_definition_id,
        strategy=document.strategy.value,
        mode=document.mode.value,
        trials=document.trials,
        inputs=document.inputs.model_dump(mode="json"),
        request=request.model_dump(mode="json", exclude_unset=True, exclude_none=True),
        workload=document.model_dump(mode="json"),
    )
    session.add(plan)
    session.flush()
    return plan


def create_plan(
    session: Session, request: PlanRequest, name: str | None = None, sandbox: SandboxPolicy | None = None
) -> Plan:
    document, model_definition_id = plan_for_request(session, request, sandbox)
    return save_document(session, document, request, name, model_definition_id)


def list_plans(session: Session, limit: int = 100, offset: int = 0) -> list[Plan]:
    return newest_first(session, Plan, limit, offset)


def get_plan(session: Session, plan_id: int) -> Plan:
    return get_row(session, Plan, plan_id, PlanNotFound, "plan")


def plan_document(plan: Plan) -> PlanDocument:
    return PlanDocument.model_validate(plan.workload)
