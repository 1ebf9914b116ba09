"""Plans: preview, store, list, read, export for KCCB; and the built-in model presets."""

from dataclasses import asdict

from fastapi import APIRouter, Query
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field

from emuplan.api.access import requires_roles
from emuplan.api.deps import (
    DatabaseInt,
    ListLimit,
    ListOffset,
    ReadSessionDep,
    SettingsDep,
    WriteSessionDep,
    response_model_of,
)
from emuplan.api.labels import LabelChanges
from emuplan.api.responses import SIGNED_IN, attachment, download, errors
from emuplan.results.budget import ImportLimits
from emuplan.roles import Role
from emuplan.sandbox.runner import SandboxPolicy
from emuplan.services.plan_deletion import delete_plan, plan_deletion
from emuplan.services.plans import plan_request
from emuplan.services.workload_export import WORKLOAD_FORMATS, chakra_bundle
from emuplan.store import plans as store
from emuplan.workload.chakra.bundle import zip_stream
from emuplan.workload.chakra.schedule import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS
from emuplan.workload.document import PlanDocument, PlanRequest
from emuplan.workload.kccb import export_kccb
from emuplan.workload.presets import PRESETS
from emuplan.workload.sources import resolve_model, stored_model_spec

PLAN_ERRORS = errors(400, *SIGNED_IN, 404, 409, 422, 503)
# Deleting a plan unlinks its runs: an admin's decision, as deleting a run is.
router = APIRouter(
    prefix="/api/plans", tags=["plans"], dependencies=requires_roles(delete=Role.admin), responses=PLAN_ERRORS
)
# A preview computes and stores nothing: a read, open to viewers (a POST only because the request is a body).
preview_router = APIRouter(
    prefix="/api/plans", tags=["plans"], dependencies=requires_roles(write=Role.viewer), responses=PLAN_ERRORS
)
presets_router = APIRouter(
    prefix="/api/presets", tags=["plans"], dependencies=requires_roles(), responses=errors(*SIGNED_IN)
)

EXPORT_MEDIA_TYPES = {"yaml": "application/yaml", "json": "application/json", "text": "text/plain; charset=utf-8"}
EXPORT_SUFFIXES = {"yaml": "yaml", "json": "json", "text": "txt"}


class PlanCreate(PlanRequest):
    name: str | None = Field(default=None, max_length=200, description="Default: model, strategy and mode.")
    model: str = Field(default="", description="Preset name, or 'model:<id>' for an uploaded model definition.")
    model_definition_id: DatabaseInt | None = Field(default=None, description="An uploaded model (GET /api/models).")
    platform: str | None = Field(
        default=None, max_length=64, description="The platform profile it is planned for (GET /api/platforms)."
    )

    def plan_request(self) -> PlanRequest:
        """The planner's request, with ``model_definition_id`` folded into ``model``."""
        model = self.model
        if self.model_definition_id is not None:
            model = stored_model_spec(self.model_definition_id)
            if self.model and self.model != model:
                raise ValueError(f"model: {self.model!r} contradicts model_definition_id {model!r}")
        if not model:
            raise ValueError("model: give a preset name or a model_definition_id")
        return PlanRequest.model_validate(
            {**self.model_dump(exclude={"name", "model_definition_id", "platform"}, exclude_unset=True), "model": model}
        )


PlanSummary = response_model_of(store.ListedPlan, "PlanSummary")


class PlanPublic(PlanSummary):
    platform: str | None = Field(description="The platform profile it is planned for; runs measured from it name it.")
    note: str
    inputs: dict
    request: dict | None = Field(description="The request as given (fields left at their defaults omitted).")
    workload: PlanDocument


class PlanChanges(LabelChanges):
    """``PATCH /api/plans/{id}``: rename, retag or annotate (its inputs never change: plan again for others)."""


class PlanDeletion(BaseModel):
    """What deleting a plan does besides removing it."""

    plan_id: int
    name: str
    unlinked_run_ids: list[int] = Field(
        description="The runs linked to it: they are unlinked, their statistics computed again without its network."
    )
    comparisons: list[dict[str, int | str]] = Field(
        description="The saved comparisons that read a run with it ({id, name}): they read that run with its own "
        "plan again."
    )


class PresetPublic(BaseModel):
    name: str
    description: str
    parameter_count: int
    defaults: dict


def _public(plan) -> PlanPublic:
    return PlanPublic(**plan.model_dump(exclude={"workload"}), workload=store.plan_document(plan))


@preview_router.post("/preview", name="preview_plan")
def preview_plan(request: PlanRequest, session: ReadSessionDep, settings: SettingsDep) -> PlanDocument:
    """The plan document for these inputs, computed and returned without storing anything."""
    return plan_request(request, session, SandboxPolicy.from_settings(settings))[0]


@router.post("", name="create_plan", status_code=201)
def create_plan(
    body: PlanCreate, session: WriteSessionDep, read_session: ReadSessionDep, settings: SettingsDep
) -> PlanPublic:
    """Plan and store; the response carries the new plan's ``id``."""
    request = body.plan_request()
    # Planned on the read session: an uploaded PyTorch model's capture runs in the sandbox for
    # seconds, and must not hold the database's write lock meanwhile.
    document, model_definition_id = plan_request(request, read_session, SandboxPolicy.from_settings(settings))
    plan = store.save_document(session, document, request, body.name, model_definition_id, body.platform)
    session.commit()
    return _public(plan)


@router.get("", name="list_plans")
def list_plans(
    session: ReadSessionDep,
    limit: ListLimit = 100,
    offset: ListOffset = 0,
) -> list[PlanSummary]:
    return [PlanSummary(**plan._asdict()) for plan in store.list_plans(session, limit, offset)]


@router.get("/{plan_id}", name="get_plan")
def get_plan(plan_id: DatabaseInt, session: ReadSessionDep) -> PlanPublic:
    return _public(store.get_plan(session, plan_id))


@router.patch("/{plan_id}", name="change_plan")
def change_plan(plan_id: DatabaseInt, changes: PlanChanges, session: WriteSessionDep) -> PlanPublic:
    plan = store.update_plan(session, plan_id, **changes.given())
    session.commit()
    return _public(plan)


@router.get("/{plan_id}/deletion", name="preview_plan_deletion")
def preview_plan_deletion(plan_id: DatabaseInt, session: ReadSessionDep) -> PlanDeletion:
    """What ``DELETE /api/plans/{id}`` would do besides removing the plan (its page's confirmation says it)."""
    return PlanDeletion(**plan_deletion(session, plan_id))


@router.delete("/{plan_id}", name="remove_plan")
def remove_plan(plan_id: DatabaseInt, session: WriteSessionDep, settings: SettingsDep) -> PlanDeletion:
    """Delete the plan (the admin role) after unlinking its runs; 409 while it is being measured or simulated, or
    while a huge run is linked to it (unlink that run first: its relabel job computes its statistics again)."""
    consequences = delete_plan(session, plan_id, ImportLimits.from_settings(settings))
    session.commit()
    return PlanDeletion(**consequences)


@router.get("/{plan_id}/kccb", name="export_plan_kccb", responses=download(*EXPORT_MEDIA_TYPES.values()))
def export_plan_kccb(
    plan_id: DatabaseInt,
    session: ReadSessionDep,
    export_format: str = Query(default="yaml", alias="format", pattern="^(yaml|json|text)$"),
) -> Response:
    """The plan's KCCB trial configuration as YAML (KAI's field names), JSON, or a paste-ready list."""
    plan = store.get_plan(session, plan_id)
    body = export_kccb(store.plan_document(plan), export_format)
    return Response(
        content=body,
        media_type=EXPORT_MEDIA_TYPES[export_format],
        headers=attachment(f"plan-{plan_id}-kccb.{EXPORT_SUFFIXES[export_format]}"),
    )


@router.get("/{plan_id}/workload", name="export_plan_workload", responses=download("application/zip"))
def export_plan_workload(
    plan_id: DatabaseInt,
    session: ReadSessionDep,
    workload_format: str = Query(alias="format", description=f"One of: {', '.join(WORKLOAD_FORMATS)}."),
    gpu: str = Query(default=DEFAULT_GPU, description=f"GPU whose dense bf16 peak times compute: {', '.join(GPUS)}."),
    utilisation: float = Query(default=DEFAULT_UTILISATION, description="Fraction of the GPU peak reached (0, 1]."),
    ranks: str | None = Query(
        default=None,
        max_length=1000,
        description="Ranks to write: all, or e.g. 0-7 or 0,4,8-11. Default: all up to 16384 ranks, else one per stage.",
    ),
) -> Response:
    """One training step of the plan as per-rank Chakra execution traces with communicator groups (zip)."""
    if workload_format not in WORKLOAD_FORMATS:
        raise ValueError(f"format: unknown workload format {workload_format!r}; use one of: chakra")
    plan = store.get_plan(session, plan_id)
    files = chakra_bundle(session, plan.id, gpu, utilisation, ranks)
    # Refusals are raised above; the zip then streams member by member, never whole in memory.
    return StreamingResponse(
        zip_stream(files),
        media_type="application/zip",
        headers=attachment(f"plan-{plan_id}-chakra.zip"),
    )


@presets_router.get("", name="list_presets")
def list_presets() -> list[PresetPublic]:
    return [
        PresetPublic(
            name=preset.name,
            description=preset.description,
            parameter_count=resolve_model(preset.name).parameter_count,
            defaults=asdict(preset.defaults),
        )
        for preset in PRESETS.values()
    ]
