"""Saved comparisons, their share links, and the token-scoped JSON a share link opens.

Everything under ``/api/shared/{token}`` is reachable with the token alone and shows the one
comparison it names: never a general run endpoint, never another run.
"""

import logging
import re
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseInt, ReadSessionDep, SettingsDep, WriteSessionDep
from emuplan.api.labels import LabelChanges
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.api.routes.runs import AssumptionsDocument, PlotlyFigure
from emuplan.api.step_cost import StepCostComparison
from emuplan.api.urls import url_path
from emuplan.charts import FigureKind
from emuplan.roles import Role
from emuplan.services import comparisons as comparison_service
from emuplan.services import runs as run_service
from emuplan.store import comparisons as store

# Deleting a comparison ends every share link to it: the admin role, as deleting runs and plans. Revoking one
# link (DELETE …/shares/{id}, on ``share_links_router``) stays the editor's, who shares: the link is kept, revoked.
COMPARISON_ERRORS = errors(400, *SIGNED_IN, 404, 422)
router = APIRouter(
    prefix="/api/comparisons",
    tags=["comparisons"],
    dependencies=requires_roles(delete=Role.admin),
    responses=COMPARISON_ERRORS,
)
share_links_router = APIRouter(
    prefix="/api/comparisons", tags=["comparisons"], dependencies=requires_roles(), responses=COMPARISON_ERRORS
)
shared_router = APIRouter(prefix="/api/shared", tags=["comparisons"], responses=errors(404, 410, 422))


class ChartOptions(BaseModel):
    log_x: bool = Field(default=True, description="CDF x axis on a log scale.")


class SavedAssumptions(BaseModel):
    """The figures the reader set when saving (each omitted: every run's own), as ``GET /api/compare`` takes them."""

    model_config = ConfigDict(extra="forbid")

    link_gbps: float | None = Field(default=None, gt=0, le=1e7, description="Link speed per rank, Gbit/s.")
    latency_us: float | None = Field(default=None, ge=0, le=1e7, description="Latency α, µs.")
    ranks: int | None = Field(default=None, ge=1, le=1_000_000)


class ComparisonCreate(BaseModel):
    name: str = Field(max_length=200)
    run_ids: list[DatabaseInt]
    baseline_run_id: DatabaseInt | None = None
    options: ChartOptions = Field(default_factory=ChartOptions)
    assumptions: SavedAssumptions = Field(
        default_factory=SavedAssumptions,
        description="Kept with the comparison: its page and every share link show the runs under them.",
    )
    plans: dict[DatabaseInt, DatabaseInt] = Field(
        default_factory=dict, description="Run id → the plan its training step is read with (else its linked plan)."
    )


class ComparisonPublic(BaseModel):
    id: int
    name: str
    run_ids: list[int]
    baseline_run_id: int | None
    options: dict
    tags: list[str]
    note: str
    created_at: datetime


class ComparisonChanges(LabelChanges):
    """``PATCH /api/comparisons/{id}``: rename, retag or annotate."""


class ComparisonDeletion(BaseModel):
    comparison_id: int
    name: str
    share_links: int = Field(description="Its share links, deleted with it (they answer 404 from then on).")
    active_share_links: int = Field(description="Of those, the ones that still opened it.")


class ShareCreate(BaseModel):
    expires_in_days: float | None = Field(default=None, description="Omit for a link that never expires.")
    label: str = Field(default="", max_length=200, description="Whom or what it is for.")


class ShareChanges(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str = Field(max_length=200, description="Whom or what it is for.")


class SharePublic(BaseModel):
    id: int
    comparison_id: int
    label: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    state: str


class ShareCreated(SharePublic):
    token: str = Field(description="Shown once; only its SHA-256 is stored.")
    path: str = Field(description="The read-only page this token opens.")


class RunAssumptions(AssumptionsDocument):
    run_id: int


class SweepSize(BaseModel):
    """One (collective, data size) of a size sweep, against the reference sweep's."""

    collective: str
    size_bytes: int
    time_us: float = Field(description="Mean time over the variants (out-of-place, in-place), µs.")
    algbw_gbps: float | None = Field(description="As the file printed it (mean over the variants), else ours.")
    busbw_gbps: float | None = Field(description="As the file printed it (mean over the variants), else ours.")
    busbw_ratio: float | None = Field(description="busbw ÷ the reference's (see ``ratio_basis``); null for it.")
    change_pct: float | None = Field(description="(busbw_ratio − 1) × 100.")
    below_floor: bool = Field(
        description="Both sweeps' busbw here under the log's print resolution (every cell 0.00 GB/s): the ratio of "
        "two readings of the floor is not judged, and the verdict line leaves the size out, saying so."
    )
    verdict: Literal["better", "worse", "same"] | None = Field(
        description="``same`` within ±``same_within_pct``; null for the reference, sizes it lacks and sizes below "
        "the floor."
    )


class SweepRun(BaseModel):
    """A size sweep in a comparison: its headline, its sizes and its one-line verdict."""

    run_id: int
    name: str
    headline: list[dict[str, Any]] = Field(
        description="Per collective: peak busbw (and where), average busbw as nccl-tests' '# Avg bus bandwidth' "
        "computes it, and the log's own line (``results.analysis.run_analysis.size_sweep``)."
    )
    sizes: list[SweepSize]
    verdict: str | None = Field(
        description="'#7 vs #4: −20.0 % busbw at 3 sizes (512 MiB–2 GiB), same (within ±5 %) at 26 sizes (8 B–256 "
        "MiB)'; null for the reference."
    )


class SweepComparison(BaseModel):
    """Size sweeps compared size by size (``results.analysis.compare``): no percentiles, CDFs or KS tests."""

    reference_run_id: int = Field(description="The baseline when it is a size sweep, else the first sweep.")
    same_within_pct: float = Field(description="A busbw change within ± this many % is 'same' (run-to-run noise).")
    ratio_basis: str
    runs: list[SweepRun]


class ComparisonDocument(BaseModel):
    """Statistics with deltas to the baseline, KS tests for every pair of runs, and the comparison
    figures (``results.analysis.compare.compare_runs`` for every field)."""

    model_config = ConfigDict(extra="allow")

    baseline_run_id: int | None
    notice: str | None = Field(
        description="Set when a run shares no (collective, data size) with the baseline: it has no ratios "
        "and no Kolmogorov–Smirnov test against it."
    )
    training_vs_emulation: str | None = Field(
        description="Set when runs observed in training are compared with benchmarks: which run is which, and how "
        "their groups are lined up."
    )
    time_unit: Literal["µs", "ms", "s"] = Field(description="The page's one time unit.")
    us_per_unit: float
    assumptions: list[RunAssumptions] = Field(
        description="Per run, in the runs' order: the network its bandwidths and % of ideal assume."
    )
    step_cost: StepCostComparison = Field(
        description="What one training step of each run's plan costs on it, × the baseline's: the comparison "
        "of strategies (``results.analysis.step_cost``)."
    )
    verdicts: list[dict[str, Any]] = Field(
        description="Per run, in the runs' order: its platform and verdict (status, reasons, thresholds)."
    )
    runs: list[dict[str, Any]] = Field(
        description="Per run: its ``kind`` (size-sweep | distribution, stored at import), per group the deltas "
        "against the baseline (a sweep's: count, mean time, algbw, busbw, % of ideal only) and ``overall`` (all "
        "groups together; null for a size sweep, whose one value per size has no distribution)."
    )
    ks_tests: list[dict[str, Any]] = Field(description="Every pair of distributions; size sweeps are never tested.")
    sweep: SweepComparison | None = Field(description="The size sweeps compared size by size; null without sweeps.")
    figures: dict[str, PlotlyFigure] = Field(
        description="``sweeps`` (overlaid busbw-vs-size curves) for the size sweeps; ``cdf``, ``small_multiples`` "
        "and ``delays`` (completion time per iteration, a panel per run) for the distributions; ``step_cost`` "
        "(each run's step time stacked by collective kind) when a run has a plan."
    )


class SharedComparisonDocument(ComparisonDocument):
    comparison: ComparisonPublic


@router.post("", name="create_comparison", status_code=201, response_model=ComparisonPublic)
def create_comparison(body: ComparisonCreate, session: WriteSessionDep) -> dict:
    comparison = store.create_comparison(
        session,
        body.name,
        body.run_ids,
        body.baseline_run_id,
        body.options.model_dump(),
        assumptions=body.assumptions.model_dump(),
        plans=body.plans,
    )
    session.commit()
    return store.comparison_document(comparison)


@router.get("", name="list_comparisons", response_model=list[ComparisonPublic])
def list_comparisons(session: ReadSessionDep) -> list[dict]:
    return [store.comparison_document(c) for c in store.list_comparisons(session)]


@router.get("/{comparison_id}", name="get_comparison", response_model=ComparisonPublic)
def get_comparison(comparison_id: DatabaseInt, session: ReadSessionDep) -> dict:
    return store.comparison_document(store.get_comparison(session, comparison_id))


@router.patch("/{comparison_id}", name="change_comparison", response_model=ComparisonPublic)
def change_comparison(comparison_id: DatabaseInt, changes: ComparisonChanges, session: WriteSessionDep) -> dict:
    comparison = store.update_comparison(session, comparison_id, **changes.given())
    session.commit()
    return store.comparison_document(comparison)


@router.get("/{comparison_id}/deletion", name="preview_comparison_deletion", response_model=ComparisonDeletion)
def preview_comparison_deletion(comparison_id: DatabaseInt, session: ReadSessionDep) -> dict:
    """What ``DELETE /api/comparisons/{id}`` would do besides (its page's confirmation says it)."""
    return store.comparison_deletion(session, comparison_id)


@router.delete("/{comparison_id}", name="delete_comparison", response_model=ComparisonDeletion)
def delete_comparison(comparison_id: DatabaseInt, session: WriteSessionDep) -> dict:
    """Delete the saved comparison and its share links; its runs stay."""
    consequences = store.delete_comparison(session, comparison_id)
    session.commit()
    return consequences


@share_links_router.get("/{comparison_id}/shares", name="list_shares", response_model=list[SharePublic])
def list_shares(comparison_id: DatabaseInt, session: ReadSessionDep) -> list[dict]:
    store.get_comparison(session, comparison_id)
    return [store.share_link_document(link) for link in store.list_share_links(session, comparison_id)]


@share_links_router.post("/{comparison_id}/shares", name="create_share", status_code=201, response_model=ShareCreated)
def create_share(
    comparison_id: DatabaseInt, body: ShareCreate, request: Request, session: WriteSessionDep, response: Response
) -> dict:
    store.get_comparison(session, comparison_id)
    link, token = store.create_share_link(session, comparison_id, body.expires_in_days, body.label)
    session.commit()
    # The token is a credential: keep it out of caches.
    response.headers["Cache-Control"] = "no-store"
    return {
        **store.share_link_document(link),
        "token": token,
        "path": url_path(request.app, "shared_comparison_page", token=token),
    }


@share_links_router.patch("/{comparison_id}/shares/{share_id}", name="change_share", response_model=SharePublic)
def change_share(
    comparison_id: DatabaseInt, share_id: DatabaseInt, changes: ShareChanges, session: WriteSessionDep
) -> dict:
    """Name whom or what the link is for; its token and life stay."""
    link = store.relabel_share_link(session, comparison_id, share_id, changes.label)
    session.commit()
    return store.share_link_document(link)


@share_links_router.delete("/{comparison_id}/shares/{share_id}", name="revoke_share", response_model=SharePublic)
def revoke_share(comparison_id: DatabaseInt, share_id: DatabaseInt, session: WriteSessionDep) -> dict:
    link = store.revoke_share_link(session, comparison_id, share_id)
    session.commit()
    return store.share_link_document(link)


# uvicorn's access log prints every request path; a share token in it would hand the link to anyone
# who can read the logs. The paths that carry a token: /s/<token>, /s/<token>.json, /api/shared/<token>/...
_TOKEN_IN_PATH = re.compile(r"(/s/|/api/shared/)[A-Za-z0-9_\-]+")


def redact_share_tokens(text: str) -> str:
    return _TOKEN_IN_PATH.sub(r"\1[redacted]", text)


class RedactShareTokens(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_share_tokens(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = redact_share_tokens(record.msg)
        return True


def install_share_token_redaction() -> None:
    for name in ("uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(existing, RedactShareTokens) for existing in logger.filters):
            logger.addFilter(RedactShareTokens())


@shared_router.get("/{token}", name="shared_comparison", response_model=SharedComparisonDocument)
def shared_comparison(token: str, session: ReadSessionDep, settings: SettingsDep, response: Response) -> dict:
    """The JSON twin of the share page ``/s/{token}``: the one comparison the token opens, with the
    statistics, KS tests and figures of ``GET /api/compare`` for its runs."""
    response.headers["Referrer-Policy"] = store.SHARE_REFERRER_POLICY
    response.headers["Cache-Control"] = "no-store"
    comparison = store.resolve_share_token(session, token)
    runs = store.present_runs(session, comparison)
    if not runs:
        raise HTTPException(status_code=410, detail="The runs of this comparison were deleted.")
    document = comparison_service.compare_stored_runs(
        session,
        [run.id for run in runs],
        store.present_baseline(comparison, runs),
        settings=settings,
        choice=comparison_service.saved_assumptions(comparison),
        plans=store.saved_plans(session, comparison, runs),
        log_x=bool(comparison.options.get("log_x")),
    )
    return {"comparison": store.comparison_document(comparison), **document}


@shared_router.get("/{token}/runs/{run_id}/figures/{kind}", name="shared_run_figure", response_model=PlotlyFigure)
def shared_run_figure(
    token: str,
    run_id: DatabaseInt,
    kind: FigureKind,
    session: ReadSessionDep,
    settings: SettingsDep,
    response: Response,
) -> dict:
    """A figure of one run of the shared comparison; any other run is 404, as if it did not exist."""
    response.headers["Referrer-Policy"] = store.SHARE_REFERRER_POLICY
    response.headers["Cache-Control"] = "no-store"  # token-scoped, like the share page: no cached copy
    comparison = store.resolve_share_token(session, token)
    run = next((run for run in store.present_runs(session, comparison) if run.id == run_id), None)
    if run is None:
        raise HTTPException(status_code=404, detail="This shared comparison has no such run.")
    # A share link shows the figures as the comparison was saved: its assumptions, none from the URL.
    return run_service.run_figure(session, run, kind, comparison_service.saved_assumptions(comparison), settings)
