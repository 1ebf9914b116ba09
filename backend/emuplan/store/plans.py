"""Stored plans: the request, the filled-in inputs and the plan document in one row; the document is
read back only through ``PlanDocument`` (``plan_document``). Planning itself is ``emuplan.services.plans``.
"""

from datetime import datetime
from typing import NamedTuple

from sqlmodel import Session, col, func, select

from emuplan.store.platforms import platform_exists
from emuplan.store.rows import NotFound, get_row, newest_columns, relabel
from emuplan.store.tables import Plan, Run
from emuplan.workload.document import PlanDocument, PlanRequest


class PlanNotFound(NotFound):
    pass


def default_plan_name(document: PlanDocument) -> str:
    """What a plan saved without a name is called: its model, strategy and mode, and each parallel degree
    above 1 that the strategy leaves open ("mixtral-8x7b hybrid (framework), TP 2, EP 8")."""
    inputs = document.inputs
    degrees = [f"{label} {degree}" for label, degree in (("TP", inputs.tp), ("PP", inputs.pp), ("EP", inputs.ep))
               if degree > 1]  # fmt: skip
    return ", ".join([f"{document.model.name} {document.strategy.value} ({document.mode.value})", *degrees])


def save_document(
    session: Session,
    document: PlanDocument,
    request: PlanRequest,
    name: str | None = None,
    model_definition_id: int | None = None,
    platform: str | None = None,
) -> Plan:
    """Adds the plan to the session; the caller's transaction commits it. The request is kept as
    given (the fields set), so an edit starts from what the user chose. ``platform``: the profile it is
    planned for; runs measured from it name it too."""
    if platform is not None and not platform_exists(session, platform):
        raise ValueError(f"platform: no platform named {platform!r} (GET /api/platforms lists them)")
    plan = Plan(
        name=name or default_plan_name(document),
        model_name=document.model.name,
        model_definition_id=model_definition_id,
        strategy=document.strategy.value,
        mode=document.mode.value,
        trials=document.trials,
        inputs=document.inputs.model_dump(mode="json"),
        request=request.model_dump(mode="json", exclude_unset=True, exclude_none=True),
        workload=document.model_dump(mode="json"),
        platform=platform,
    )
    session.add(plan)
    session.flush()
    return plan


class PlanName(NamedTuple):
    """What the selects that pick a plan show."""

    id: int
    name: str


class RecentPlan(NamedTuple):
    """What the home page's recent plans show."""

    id: int
    name: str
    strategy: str
    trials: int


class ListedPlan(NamedTuple):
    """An item of ``GET /api/plans`` and ``emuplan plans``."""

    id: int
    name: str
    model_name: str
    model_definition_id: int | None
    strategy: str
    mode: str
    trials: int
    platform: str | None
    tags: list[str]
    created_at: datetime


def list_plans(session: Session, limit: int = 100, offset: int = 0) -> list[ListedPlan]:
    return newest_columns(session, Plan, ListedPlan, limit, offset)


PLANS_PER_PAGE = 50


def count_plans(session: Session) -> int:
    return session.exec(select(func.count()).select_from(Plan)).one()


def linked_run_counts(session: Session, plan_ids: list[int]) -> dict[int, int]:
    """How many runs are linked to each of ``plan_ids`` (a plan without any is left out)."""
    statement = select(Run.plan_id, func.count()).where(col(Run.plan_id).in_(plan_ids)).group_by(Run.plan_id)
    return dict(session.exec(statement).all())


def plan_names(session: Session, limit: int) -> list[PlanName]:
    return newest_columns(session, Plan, PlanName, limit)


def recent_plans(session: Session, limit: int) -> list[RecentPlan]:
    return newest_columns(session, Plan, RecentPlan, limit)


def get_plan(session: Session, plan_id: int) -> Plan:
    return get_row(session, Plan, plan_id, PlanNotFound, "plan")


def update_plan(
    session: Session, plan_id: int, *, name: str | None = None, tags: list[str] | None = None, note: str | None = None
) -> Plan:
    """Rename, retag or annotate a plan (each None: as it is), in the caller's session (flushed). Its inputs and
    document never change: a plan with other inputs is a new plan ("Edit as a new plan")."""
    return relabel(session, get_plan(session, plan_id), "plan", name=name, tags=tags, note=note)


def plan_document(plan: Plan) -> PlanDocument:
    return PlanDocument.model_validate(plan.workload)
