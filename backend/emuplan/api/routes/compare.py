"""``GET /api/compare``: any stored runs side by side, without saving a comparison."""

from typing import Annotated

from fastapi import APIRouter, Query

from emuplan.api.access import requires_roles
from emuplan.api.deps import INT64_MAX, DatabaseInt, ReadSessionDep, SettingsDep
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.api.routes.comparisons import ComparisonDocument
from emuplan.api.routes.runs import AssumptionDep
from emuplan.api.step_cost import PlanQuery
from emuplan.results.analysis.step_cost import parse_plan_choices
from emuplan.services import comparisons as comparison_service

router = APIRouter(
    prefix="/api/compare", tags=["comparisons"], dependencies=requires_roles(), responses=errors(*SIGNED_IN, 404, 422)
)


def parse_run_ids(text: str) -> list[int]:
    """``"1,2,3"`` → ``[1, 2, 3]``; a ValueError naming the ``runs`` field otherwise."""
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"runs: expected comma-separated run ids, got {text!r}") from None
    if not ids:
        raise ValueError("runs: choose at least one run to compare")
    out_of_range = [run_id for run_id in ids if not 0 <= run_id <= INT64_MAX]
    if out_of_range:
        raise ValueError(f"runs: {out_of_range[0]} is not a run id (0 to 2^63 − 1)")
    return ids


@router.get("", name="compare", response_model=ComparisonDocument)
def compare(
    session: ReadSessionDep,
    settings: SettingsDep,
    choice: AssumptionDep,
    runs: Annotated[str, Query(description="Comma-separated run ids, e.g. 1,2,3.")],
    baseline: DatabaseInt | None = None,
    log_x: bool = False,
    plan: PlanQuery = None,
    plans: Annotated[
        str | None,
        Query(description="run:plan pairs, e.g. 4:1,5:2: read run 4 with plan 1's collectives (overrides ``plan``)."),
    ] = None,
) -> dict:
    """The runs side by side; ``link_gbps``, ``latency_us`` and ``ranks`` replace every run's own assumption
    (its plan's, its file's, the settings') for bandwidths and % of ideal, as on a run page. ``plan`` reads
    every run with that plan (what one of its training steps costs on each run's fabric), ``plans`` one run
    at a time; otherwise each run's linked plan."""
    run_ids = parse_run_ids(runs)
    return comparison_service.compare_stored_runs(
        session,
        run_ids,
        baseline,
        settings=settings,
        choice=choice,
        plans=plan_choices(run_ids, plan, plans),
        log_x=log_x,
    )


def plan_choices(run_ids: list[int], plan: int | None, plans: str | None) -> dict[int, int]:
    """The plan per run a view asked for: ``plan`` for every run, then the ``plans`` pairs."""
    return {**({run_id: plan for run_id in run_ids} if plan is not None else {}), **parse_plan_choices(plans)}
