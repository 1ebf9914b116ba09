"""/plan: the plan form, made from ``PlanRequest``'s fields, empty or filled from a saved plan."""

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Annotated, get_args

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from pydantic.fields import FieldInfo

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseInt, ReadSessionDep
from emuplan.api.render import render
from emuplan.services import model_definitions as model_service
from emuplan.services import platforms as platform_service
from emuplan.store import plans as plan_store
from emuplan.store.tables import Plan
from emuplan.workload.document import PlanRequest
from emuplan.workload.inventory import DTYPE_BYTES
from emuplan.workload.plan_options import OptionGroup
from emuplan.workload.presets import PRESETS

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


def _preset_choices() -> list[dict]:
    return [
        {"name": preset.name, "description": preset.description, "defaults": asdict(preset.defaults)}
        for preset in PRESETS.values()
    ]


# How the plan page names the choices of the request's enumerations.
CHOICE_TEXT = {
    "data": "data parallel",
    "tensor": "tensor parallel",
    "pipeline": "pipeline",
    "hybrid": "hybrid DP×TP×PP",
    "tutorial": "tutorial rules",
    "framework": "framework (PyTorch)",
    "ddp": "DDP",
    "fsdp2": "FSDP2",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "zero3": "ZeRO-3",
    "0.11": "0.11 or older",
    "0.16": "0.12 – 0.16",
}


@dataclass(frozen=True)
class FormField:
    """One control of the plan form, made from a ``PlanRequest`` field."""

    name: str
    label: str
    help: str
    kind: str  # select | checkbox | integer | decimal
    choices: tuple[tuple[str, str], ...] = ()
    default: object = None  # the request's own default; None: the planner fills it in from the model


def _form_field(name: str, info: FieldInfo) -> FormField:
    kind_type = next(t for t in (get_args(info.annotation) or (info.annotation,)) if t is not type(None))
    default = None if info.is_required() else info.default
    base = {"name": name, "label": info.title, "help": info.description, "default": default}
    if isinstance(kind_type, type) and issubclass(kind_type, Enum):
        return FormField(**base, kind="select", choices=tuple((m.value, CHOICE_TEXT[m.value]) for m in kind_type))
    if name.endswith("_dtype"):
        return FormField(**base, kind="select", choices=tuple((dtype, dtype) for dtype in DTYPE_BYTES))
    if kind_type is bool:
        return FormField(**base, kind="checkbox")
    return FormField(**base, kind="integer" if kind_type is int else "decimal")


def plan_form_groups() -> list[tuple[OptionGroup, list[FormField]]]:
    """The plan form: every ``PlanRequest`` field, in its option group (the CLI's help panels)."""
    fields = [
        (PlanRequest.option_group(name), _form_field(name, info)) for name, info in PlanRequest.model_fields.items()
    ]
    return [(group, [field for field_group, field in fields if field_group is group]) for group in OptionGroup]


def _plan_page(request: Request, session, initial: dict, based_on: Plan | None = None) -> HTMLResponse:
    return render(
        request,
        "plan.html",
        nav="plan",
        presets=_preset_choices(),
        uploaded_models=model_service.list_model_definitions(session, 1000),
        form_groups=plan_form_groups(),
        initial=initial,
        based_on=based_on,
        platform_choices=platform_service.platform_titles(session),
    )


@router.get("/plan", name="plan_page", response_class=HTMLResponse)
def plan_page(
    request: Request, session: ReadSessionDep, from_plan: Annotated[DatabaseInt | None, Query(alias="from")] = None
) -> HTMLResponse:
    """The plan form; ``?from=<id>`` fills it with a saved plan's request ("Edit as a new plan")."""
    if from_plan is None:
        return _plan_page(request, session, {})
    plan = plan_store.get_plan(session, from_plan)
    # Plans stored before requests were kept offer their filled-in inputs instead.
    return _plan_page(request, session, plan.request if plan.request is not None else plan.inputs, plan)
