"""``GET /api/compare``: any stored runs side by side, without saving a comparison."""

from typing import Annotated

from fastapi import APIRouter, Query

from emuplan.api.access import requires_roles
from emuplan.api.comparisons import ComparisonDocument
from emuplan.api.deps import INT64_MAX, DatabaseInt, ReadSessionDep, SettingsDep
from emuplan.api.runs import AssumptionDep
from emuplan.store import runs as store

router = APIRouter(prefix="/api/compare", tags=["comparisons"], dependencies=requires_roles())


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


@router.get("", response_model=ComparisonDocument)
def compare(
    session: ReadSessionDep,
    settings: SettingsDep,
    choice: AssumptionDep,
    runs: Annotated[str, Query(description="Comma-separated run ids, e.g. 1,2,3.")],
    baseline: DatabaseInt | None = None,
    log_x: bool = False,
) -> dict:
    """The runs side by side; ``link_gbps``, ``latency_us`` and ``ranks`` replace every run's own assumption
    (its plan's, its file's, the settings') for bandwidths and % of ideal, as on a run page."""
    return store.compare_stored_runs(
        session, parse_run_ids(runs), baseline, settings=settings, choice=choice, log_x=log_x
    )
