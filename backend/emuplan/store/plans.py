"""Stored plans: the request, the filled-in inputs and the plan document in one row; the document is
read back only through ``PlanDocument`` (``plan_document``). Planning itself is ``emuplan.planning``.
"""

from typing import NamedTuple, TypeVar

from sqlmodel import Session, col, select

from emuplan.store.models import Plan
from emuplan.store.rows import NotFound, get_row, newest_first
from emuplan.workload.document import PlanDocument, PlanRequest


class PlanNotFound(NotFound):
    pass


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


def list_plans(session: Session, limit: int = 100, offset: int = 0) -> list[Plan]:
    return newest_first(session, Plan, limit, offset)


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


Columns = TypeVar("Columns", bound=tuple)  # a NamedTuple whose fields are Plan's column names


def _newest(session: Session, columns: type[Columns], limit: int) -> list[Columns]:
    """The newest plans' ``columns`` (the tuple's fields name them) and nothing else: no request or document."""
    statement = select(*(getattr(Plan, name) for name in columns._fields)).order_by(col(Plan.id).desc()).limit(limit)
    return [columns(*row) for row in session.exec(statement)]


def plan_names(session: Session, limit: int) -> list[PlanName]:
    return _newest(session, PlanName, limit)


def recent_plans(session: Session, limit: int) -> list[RecentPlan]:
    return _newest(session, RecentPlan, limit)


def get_plan(session: Session, plan_id: int) -> Plan:
    return get_row(session, Plan, plan_id, PlanNotFound, "plan")


def plan_document(plan: Plan) -> PlanDocument:
    return PlanDocument.model_validate(plan.workload)
