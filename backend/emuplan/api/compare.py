"""``GET /api/compare``: any stored runs side by side, without saving a comparison."""

from typing import Annotated

from fastapi import APIRouter, Query

from emuplan.api.comparisons import ComparisonDocument
from emuplan.api.deps import ReadSessionDep
from emuplan.store import runs as store

router = APIRouter(prefix="/api/compare", tags=["comparisons"])


def parse_run_ids(text: str) -> list[int]:
    """``"1,2,3"`` → ``[1, 2, 3]``; a ValueError naming the ``runs`` field otherwise."""
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"runs: expected comma-separated run ids, got {text!r}") from None
    if not ids:
        raise ValueError("runs: choose at least one run to compare")
    return ids


@router.get("", response_model=ComparisonDocument)
def compare(
    session: ReadSessionDep,
    runs: Annotated[str, Query(description="Comma-separated run ids, e.g. 1,2,3.")],
    baseline: int | None = None,
    log_x: bool = False,
) -> dict:
    return store.compare_stored_runs(session, parse_run_ids(runs), baseline, log_x=log_x)
