"""Runs: upload result files (one run, or one run each: ``upload_run``), list, read statistics and figures,
export samples, set collectives, delete.

Glue only: multipart parsing in ``api/uploads.py``, the import in ``services/imports.py`` and the run's other use
cases in ``services/runs.py`` (over ``results/``, ``charts/`` and the rows of ``store/runs.py``), errors → responses
in ``api/errors.py``: a bad file → 400 (413 past the import budget's caps, ``results/budget.py``) naming file, row
and column; no room beside the imports in flight → 503 with Retry-After; bad form fields → 422; an identical file
already imported → 409 with ``existing_run_id``; several files that are not one job → 200 with each file's outcome
(any of those). Downloads stream from storage (``store/table_files.py``).
"""

import dataclasses
import itertools
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Depends, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from sqlmodel import Session

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseDep, DatabaseInt, ReadSessionDep, SettingsDep, WriteSessionDep
from emuplan.api.memory import return_freed_memory
from emuplan.api.observed import ObservedAgainstPlan
from emuplan.api.responses import SIGNED_IN, attachment, download, errors
from emuplan.api.routes.plans import EXPORT_MEDIA_TYPES, EXPORT_SUFFIXES
from emuplan.api.step_cost import PlanQuery, StepCostDocument
from emuplan.api.uploads import SpooledFile, admitted_import, one_job, spooled_multipart_upload
from emuplan.charts import FigureKind
from emuplan.results.analysis.observed_kccb import export_observed_kccb
from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.export import samples_csv_pieces
from emuplan.results.formats import FORMATS
from emuplan.results.formats.headers import parse_column_map
from emuplan.results.run_fields import RUN_FIELDS
from emuplan.roles import Role
from emuplan.services import imports as run_imports
from emuplan.services import runs as run_service
from emuplan.services.jobs.engine import runner
from emuplan.services.jobs.relabel import RelabelJob, RelabelJobPublic
from emuplan.store import runs as run_rows
from emuplan.store.db import Database
from emuplan.store.plans import get_plan
from emuplan.store.table_files import open_stored_table, stored_table_pieces
from emuplan.store.tables import Run
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.plan_options import Strategy

# Deleting a run removes it from every comparison and share link: an admin's decision.
router = APIRouter(
    prefix="/api/runs",
    tags=["runs"],
    dependencies=requires_roles(delete=Role.admin),
    responses=errors(400, *SIGNED_IN, 404, 409, 413, 415, 422),
)
# An import, or a huge run summarised again: the imports in flight hold the memory they share (503), or the
# disk a streamed import spills to filled (507).
IMPORT_ERRORS = errors(503, 507)


def parse_tags(text: str | None) -> list[str]:
    return [tag.strip() for tag in (text or "").split(",") if tag.strip()]


class UploadForm(BaseModel):
    """The form fields next to ``file`` in ``POST /api/runs`` (all optional)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = run_service.stated_field("name", given="Default: the file name.")
    plan_id: DatabaseInt | None = run_service.stated_field("plan_id")
    # The names as a Literal, not the enum: the multipart schema below inlines these properties, and an
    # enum would become a $ref to a definition that schema does not carry.
    strategy: Literal[tuple(strategy.value for strategy in Strategy)] | None = None
    # Checked as a list by the import (services.runs.checked_tags), as PATCH's are.
    tags: str | None = run_service.stated_field("tags", given="Comma-separated.")
    format: Literal[FORMATS] | None = Field(default=None, description="Skip detection: read the file as this format.")
    column_map: str | None = Field(default=None, description='Role → column, JSON or "duration=wall_ms,size=payload".')
    collective: Literal[tuple(op.value for op in CollectiveOp)] | None = Field(
        default=None,
        description="The collective when the file does not say it: an nccl-tests log's own binary and "
        "redop/root cells come first (a choice they contradict is 400), the file name last.",
    )
    platform: str | None = run_service.stated_field("platform")
    # Checked fact by fact by the import (services.runs.facts_from_lines); the whole text is bounded here.
    facts: str | None = run_service.stated_field("facts", given="One 'key = value' a line.", max_length=10_000)
    measured_at: datetime | None = run_service.stated_field("measured_at", given="A log imported late lands in place.")
    job: bool | None = Field(
        default=None,
        description="Several files: true: one training job's records, one observed run (refused unless each is an "
        "NCCL Inspector dump or a PyTorch profiler trace); false: one run each; default: one job when every "
        "file is one of those (or an archive of them).",
    )


UPLOAD_OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "minItems": 1,
                            "description": "One or more parts named 'file': CSV (.csv.gz), Feather, Parquet, "
                            "nccl-tests log or -J JSON, ns-3 fct.txt, NCCL Inspector dump, PyTorch profiler "
                            "trace, a zip or tar of a job's dumps or traces.",
                        },
                        **UploadForm.model_json_schema()["properties"],
                    },
                }
            }
        },
    }
}


class RunSummaryDocument(BaseModel):
    """A run's cached statistics without their curves: ``overall``, one entry per group, ``flows`` for
    per-flow uploads (see ``results.analysis.stats.summarise`` for every field)."""

    model_config = ConfigDict(extra="allow")

    sample_count: int
    overall: dict[str, Any]
    groups: list[dict[str, Any]]


def _api_fields(store_fields: list[dataclasses.Field], **api_types: type) -> dict[str, Any]:
    """Pydantic fields for a store dataclass's (``run_rows.RunBase`` and its subclasses): the same names, types
    and descriptions (``RUN_FIELDS``' for those a user states), or the type ``api_types`` names; the times as the
    ISO 8601 text ``document()`` gives."""
    as_text = {"created_at": str, "measured_at": str | None}
    return {
        each.name: (as_text.get(each.name, api_types.get(each.name, each.type)), Field(description=_described(each)))
        for each in store_fields
    }


def _described(store_field: dataclasses.Field) -> str | None:
    if store_field.name == "created_at":
        return "When it was imported, ISO 8601 with its UTC offset."
    stated = RUN_FIELDS.get(store_field.name)
    return stated.description if stated else store_field.metadata.get("description")


def _added_by(subclass: type) -> list[dataclasses.Field]:
    """The fields a subclass of ``run_rows.RunBase`` adds to it."""
    return dataclasses.fields(subclass)[len(dataclasses.fields(run_rows.RunBase)) :]


RunBase = create_model(
    "RunBase",
    __doc__="What both documents of a run hold: the list's item and the whole run.",
    **_api_fields(dataclasses.fields(run_rows.RunBase)),
)
RunListItem = create_model(
    "RunListItem",
    __base__=RunBase,
    __doc__="""A run as ``GET /api/runs`` and ``emuplan runs --json`` list it: without the statistics, warnings and
    file digest that ``GET /api/runs/{id}`` adds, with the overall median and p99.""",
    **_api_fields(_added_by(run_rows.RunListItem)),
)
RunPublic = create_model(
    "RunPublic",
    __base__=RunBase,
    __doc__="A run as ``GET /api/runs/{id}`` and ``emuplan import --json`` show it.",
    # The statistics are a dict in the store; the API documents their shape.
    **_api_fields(_added_by(run_rows.RunPublic), summary=RunSummaryDocument),
)


class AssumptionsDocument(BaseModel):
    """The network behind ideal times, % of ideal and the expected curve, and where each figure came from."""

    link_gbps: float = Field(description="Link speed per rank, Gbit/s.")
    latency_us: float = Field(description="Latency α, µs.")
    ranks: int | None
    sources: dict[str, Literal["query", "plan", "file", "inferred", "settings", "none"]]
    ceiling_gbps: float | None = Field(
        description="The line rate in GB/s: busbw cannot pass it; None when no link speed was given."
    )
    link_applied: bool = Field(
        description="Whether a link speed was given (query, plan): the server's fallback is never applied "
        "silently, so without one there is no ideal time and no % of ideal."
    )


class StragglerEntry(BaseModel):
    """One rank (or host) over every call it took part in (``results.analysis.stragglers``)."""

    name: str
    host: str | None = Field(default=None, description="Ranks: the host it ran on ('' when unknown).")
    ranks: list[str] | None = Field(default=None, description="Hosts: the ranks on it.")
    calls: int
    mean_us: float
    max_us: float
    over_median: float | None = Field(description="Its summed time ÷ the median rank's (host's); 1 is typical.")
    lost_us: float = Field(description="Its summed time − the median rank's (host's), µs; negative when faster.")
    slowest_calls: int = Field(description="Calls in which it was the slowest.")
    median_mean_us: float = Field(description="The median rank's (host's) mean time over the same calls, µs.")


class StragglerHeadline(BaseModel):
    """The slowest rank or host and by how much."""

    name: str
    host: str | None = None
    over_median: float
    lost_us: float
    lost_per_call_us: float
    calls: int
    mean_us: float
    median_mean_us: float = Field(description="The median rank's (host's) mean time over the same calls, µs.")


class StragglersDocument(BaseModel):
    """Per-rank and per-host figures from files that time every rank (``results.analysis.stragglers``)."""

    unit: Literal["rank", "process", "endpoint"]
    basis: str = Field(description="What a rank's time for a call measures.")
    calls: int
    ranks: list[StragglerEntry]
    hosts: list[StragglerEntry]
    slowest_rank: StragglerHeadline | None
    slowest_host: StragglerHeadline | None


class ReasonDocument(BaseModel):
    """One finding behind a verdict (``results.analysis.verdict.Reason``)."""

    code: str
    severity: Literal["fail", "degraded", "note"]
    message: str
    collective: str | None
    size_bytes: int | None
    variant: str | None
    loss_pct: float | None = Field(
        default=None, description="The share of the expected busbw (or of the median's time) lost: the ranking's key."
    )


class VerdictDocument(BaseModel):
    """pass, degraded, fail or not judged (nothing expected: no platform or rank count), with the reasons,
    the biggest loss first, and the thresholds they were judged by."""

    status: Literal["pass", "degraded", "fail", "not judged"]
    reasons: list[ReasonDocument]
    thresholds: dict[str, float]


class PlatformReference(BaseModel):
    name: str
    title: str


class RunStatistics(RunSummaryDocument):
    """``GET /api/runs/{id}/stats`` and ``emuplan stats``: the cached statistics with every group's rates
    and % of ideal under ``assumptions``; size sweeps add ``sweep`` (peak and average busbw, per-variant
    tables; ``results.analysis.run_analysis.size_sweep``), per-iteration runs ``trials`` (slowest trials, warm-up flag);
    files that time every rank add ``stragglers``."""

    run_id: int
    name: str
    source_format: str
    assumptions: AssumptionsDocument
    kind: Literal["size-sweep", "distribution"] = Field(
        description="The run's stored kind (``results.analysis.run_analysis.run_kind``, decided at import): a size "
        "sweep gets "
        "``sweep`` and no percentiles, CDF or delay chart on its pages; a distribution gets ``trials``."
    )
    time_unit: Literal["µs", "ms", "s"] = Field(description="The page's one time unit.")
    us_per_unit: float
    stragglers: StragglersDocument | None = Field(
        default=None, description="When the file times every rank (nccl-tests -J -I 1, per-flow, measured)."
    )
    platform: PlatformReference | None = Field(description="The platform it ran on; None: not said.")
    verdict: VerdictDocument
    expected_note: str | None = Field(description="Why there is no expected curve, when there is none.")
    step_cost: StepCostDocument | None = Field(
        description="What one training step of the plan (``plan``, else the linked one) costs on this run; "
        "None without a plan."
    )


class PlotlyFigure(BaseModel):
    """A Plotly figure as JSON: pass it to ``Plotly.newPlot(element, figure.data, figure.layout)``."""

    model_config = ConfigDict(extra="allow")

    data: list[dict[str, Any]]
    layout: dict[str, Any]


class UploadOutcome(BaseModel):
    """What became of one file of an upload of several that are not one job (``emuplan import`` prints the
    same with several files)."""

    file: str
    outcome: Literal["stored", "duplicate", "refused"]
    run_id: int | None = Field(description="stored: its new run; duplicate: the run that holds the same content.")
    detail: str | None = Field(
        description="duplicate, refused: why, naming the file (the message one upload of it alone would answer with)."
    )


@router.post(
    "",
    name="upload_run",
    status_code=201,
    openapi_extra=UPLOAD_OPENAPI,
    response_model=RunPublic,
    responses={
        **IMPORT_ERRORS,
        201: {"description": "One run: the one file's, or one job's files' (an observed run)."},
        200: {
            "model": list[UploadOutcome],
            "description": "Several files that are not one job: one outcome per file, in the upload's order. Each "
            "is imported on its own (its own transaction and import budget), so a file refused (400, 409, 413, "
            "503 alone) never stops the others.",
        },
    },
)
async def upload_run(
    request: Request,
    session: WriteSessionDep,
    settings: SettingsDep,
    database: DatabaseDep,
    after_answer: BackgroundTasks,
) -> Any:
    """Import result files sent as multipart parts named ``file`` (one or many), streamed to disk as they come.

    Several files of one training job (NCCL Inspector dumps, one per process; PyTorch profiler traces, one
    per rank; archives of them) become one observed run, as ``emuplan import --job`` does: 201 with the run,
    all or nothing. Several files of other formats become one run each: 200 with an outcome per file.
    ``job`` decides which when the detection should not. A body cut short (the client went away, the
    closing boundary missing) or larger than EMUPLAN_MAX_UPLOAD_BYTES stores nothing."""
    with admitted_import(request, settings) as budget:
        async with spooled_multipart_upload(request) as upload:
            try:
                form = UploadForm.model_validate(upload.fields)
            except ValidationError as error:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors(include_url=False)
                )
                raise HTTPException(status_code=422, detail=problems) from None
            run_service.checked_tags(parse_tags(form.tags))  # before any file is parsed: 422 naming the field
            # Reading the files' heads is disk work: off the event loop.
            several_runs = len(upload.files) > 1 and not await run_in_threadpool(
                one_job, upload.files, form.job, form.format
            )
            if several_runs:
                if form.name is not None:
                    raise HTTPException(
                        status_code=422, detail="name: names one run; with several files each is named by its file name"
                    )
                # Each file is an import of its own, admitted at its own size as it comes.
                budget.release()
                limits = ImportLimits.from_settings(settings)
                outcomes = await run_in_threadpool(_import_each, database, session, upload.files, form, limits)
                answer = JSONResponse(status_code=200, content=outcomes)
            else:
                answer = await run_in_threadpool(_import_upload, database, session, upload.files, form, budget)
    # The run's tables went to the WAL; copying them into the database file waits until the answer is out.
    after_answer.add_task(database.checkpoint)
    return answer


def _refuse_duplicate(database: Database, digest: str, file_name: str) -> None:
    """A duplicate refused before its file is parsed, on a read session: ``session`` (the write transaction, SQLite's
    one writer) is first used to store, so another user's sign-in or upload never waits for a file being read."""
    with database.read_session() as reading:
        run_imports.refuse_duplicate(reading, digest, file_name)


def _import_upload(
    database: Database, session, files: list[SpooledFile], form: UploadForm, budget: ImportBudget
) -> dict:
    """One run: the one file, or one job's files (``run_imports.import_observed_files``: the strategy, collective and
    column mapping are the records' own)."""
    try:
        if len(files) > 1:
            _refuse_duplicate(
                database,
                run_imports.job_digest(file.sha256 for file in files),
                f"{files[0].file_name} and {len(files) - 1} more",
            )
            run = run_imports.import_observed_files(
                session,
                [file.path for file in files],
                name=form.name,
                plan_id=form.plan_id,
                tags=parse_tags(form.tags),
                fmt=form.format,
                budget=budget,
                platform=form.platform,
                facts=run_service.facts_from_lines((form.facts or "").splitlines()),
                measured_at=form.measured_at,
            )
        else:
            _refuse_duplicate(database, files[0].sha256, files[0].file_name)
            run = _import_file(session, files[0], form, budget)
        session.commit()
        return run_rows.run_public(run)
    finally:
        # The parse's tables are garbage by now, whether the files were imported or refused (~15 ms).
        return_freed_memory()


def _import_file(session, file: SpooledFile, form: UploadForm, budget: ImportBudget):
    return run_imports.import_result_file(
        session,
        file.path,
        file.file_name,
        name=form.name,
        plan_id=form.plan_id,
        strategy=form.strategy,
        tags=parse_tags(form.tags),
        fmt=form.format,
        column_map=parse_column_map(form.column_map),
        collective=form.collective,
        content_sha256=file.sha256,
        platform=form.platform,
        budget=budget,
        facts=run_service.facts_from_lines((form.facts or "").splitlines()),
        measured_at=form.measured_at,
    )


def _import_each(
    database: Database, session, files: list[SpooledFile], form: UploadForm, limits: ImportLimits
) -> list[dict]:
    """Each file as a run of its own, committed (or rolled back) before the next is read. The errors the table in
    ``api/errors.py`` would answer are caught here because each is one file's outcome, not the request's answer
    (as ``emuplan import`` does with several files)."""
    outcomes = []
    for file in files:
        outcome = {"file": file.file_name, "outcome": "stored", "run_id": None, "detail": None}
        try:
            _refuse_duplicate(database, file.sha256, file.file_name)
            with ImportBudget(limits) as budget:
                budget.admit(file.size, file.file_name)
                outcome["run_id"] = _import_file(session, file, form, budget).id
            session.commit()
        except run_imports.DuplicateRun as duplicate:
            session.rollback()
            outcome |= {"outcome": "duplicate", "run_id": duplicate.existing_run_id, "detail": str(duplicate)}
        except (LookupError, ValueError) as refusal:
            session.rollback()
            outcome |= {"outcome": "refused", "run_id": None, "detail": str(refusal)}
        finally:
            return_freed_memory()
        outcomes.append(outcome)
    return outcomes


def run_filters(
    strategy: str | None = None,
    plan: Annotated[DatabaseInt | None, Query(description="Only runs linked to this plan id.")] = None,
    tag: str | None = None,
    collective: Annotated[str | None, Query(max_length=64, description="Only runs of this collective.")] = None,
    platform: Annotated[str | None, Query(max_length=64, description="Only runs on this platform (its name).")] = None,
    verdict: Annotated[Literal["pass", "degraded", "fail", "not judged"] | None, Query()] = None,
    kind: Annotated[Literal["size-sweep", "distribution"] | None, Query()] = None,
    ranks: Annotated[DatabaseInt | None, Query(description="Only runs of this many ranks.")] = None,
    hosts: Annotated[DatabaseInt | None, Query(description="Only runs on this many hosts.")] = None,
    size: Annotated[DatabaseInt | None, Query(description="Only runs whose sizes span this one, bytes.")] = None,
    fact: Annotated[
        str | None, Query(max_length=300, description="'key=value' (any case), or a key the run states at all.")
    ] = None,
    q: Annotated[str | None, Query(max_length=200, description="A part of the name (any case).")] = None,
) -> run_rows.RunFilters:
    return run_rows.RunFilters(
        strategy=strategy, plan_id=plan, tag=tag, collective=collective, platform=platform, verdict=verdict,
        kind=kind, ranks=ranks, hosts=hosts, size=size, fact=fact, text=q,
    )  # fmt: skip


RunFiltersDep = Annotated[run_rows.RunFilters, Depends(run_filters)]


@router.get("", name="list_runs", response_model=list[RunListItem])
def list_runs(
    session: ReadSessionDep,
    response: Response,
    filters: RunFiltersDep,
    sort: Annotated[
        Literal[run_rows.RUN_SORTS],
        Query(
            description="newest (default), oldest, name, p50 (lowest first), busbw (peak, highest first), "
            "ranks (most first), size (largest first), verdict (fail, degraded, pass, then unjudged; each newest "
            "first), platform (A–Z), collective (its first, A–Z); runs without the figure last."
        ),
    ] = "newest",  # fmt: skip
    limit: Annotated[
        int, Query(ge=1, le=run_rows.MAX_RUNS_PER_PAGE, description="Runs per page.")
    ] = run_rows.RUNS_PER_PAGE,
    offset: Annotated[DatabaseInt, Query(description="Runs to skip (limit × page number).")] = 0,
) -> list[dict]:
    """One page of runs in the ``sort`` order; the ``X-Total-Count`` header says how many match in all, or past
    1,000 matches on PostgreSQL ``X-Total-Count-Estimate`` its planner's estimate (counting them would visit each).
    Each run's statistics are at ``GET /api/runs/{id}``."""
    count = run_rows.count_runs(session, filters)
    response.headers["X-Total-Count" if count.exact else "X-Total-Count-Estimate"] = str(count.value)
    total = count.value if count.exact else None
    return [
        run.document()
        for run in run_rows.list_runs(session, filters, sort=sort, limit=limit, offset=offset, total=total)
    ]


@router.get("/{run_id}", name="get_run", response_model=RunPublic)
def get_run(run_id: DatabaseInt, session: ReadSessionDep) -> dict:
    return run_rows.run_public(run_rows.get_run(session, run_id))


def assumption_choice(
    link_gbps: Annotated[
        float | None, Query(gt=0, le=1e7, description="Link speed per rank, Gbit/s (default: plan, then settings).")
    ] = None,
    latency_us: Annotated[
        float | None, Query(ge=0, le=1e7, description="Latency α, µs (default: plan, then settings).")
    ] = None,
    ranks: Annotated[int | None, Query(ge=1, le=1_000_000, description="Ranks (default: plan, then the file).")] = None,
) -> run_service.AssumptionChoice:
    return run_service.AssumptionChoice(link_gbps=link_gbps, latency_us=latency_us, ranks=ranks)


AssumptionDep = Annotated[run_service.AssumptionChoice, Depends(assumption_choice)]


@router.get("/{run_id}/stats", name="run_stats", response_model=RunStatistics)
def run_stats(
    run_id: DatabaseInt, session: ReadSessionDep, settings: SettingsDep, choice: AssumptionDep, plan: PlanQuery = None
) -> dict:
    return run_service.run_statistics(session, run_rows.get_run(session, run_id), choice, settings, plan_id=plan)


@router.get("/{run_id}/observed-vs-plan", name="observed_vs_plan", response_model=ObservedAgainstPlan)
def observed_vs_plan(
    run_id: DatabaseInt,
    session: ReadSessionDep,
    plan: PlanQuery = None,
    steps: Annotated[
        int | None, Query(ge=1, le=1_000_000_000, description="Steps the records span (default: the trace's own).")
    ] = None,
) -> dict:
    return run_service.observed_against_plan(session, run_rows.get_run(session, run_id), plan, steps)


@router.get("/{run_id}/kccb", name="export_run_kccb", responses=download(*EXPORT_MEDIA_TYPES.values()))
def export_run_kccb(
    run_id: DatabaseInt,
    session: ReadSessionDep,
    export_format: str = Query(default="yaml", alias="format", pattern="^(yaml|json|text)$"),
    steps: Annotated[
        int | None, Query(ge=1, le=1_000_000_000, description="Steps the records span (default: the trace's own).")
    ] = None,
) -> Response:
    """A KCCB trial from reality: the trial configuration that replays what an observed run's training job sent
    (collectives, sizes, calls per step, group sizes), in a plan's export formats (``GET /api/plans/{id}/kccb``);
    422 for a run that was not observed or records no training steps (give ``steps``)."""
    run = run_rows.get_run(session, run_id)
    body = export_observed_kccb(run.id, run.name, run.summary.get("observed"), export_format, steps)
    return Response(
        content=body,
        media_type=EXPORT_MEDIA_TYPES[export_format],
        headers=attachment(f"run-{run.id}-kccb.{EXPORT_SUFFIXES[export_format]}"),
    )


@router.get("/{run_id}/figures/{kind}", name="run_figure", response_model=PlotlyFigure)
def run_figure(
    run_id: DatabaseInt,
    kind: FigureKind,
    session: ReadSessionDep,
    settings: SettingsDep,
    choice: AssumptionDep,
    log_x: bool = False,
    log_y: Annotated[bool, Query(description="Delay chart: logarithmic time axis.")] = False,
    clip: Annotated[bool, Query(description="Delay chart: y axis up to p99.9, clipped trials marked.")] = False,
) -> dict:
    run = run_rows.get_run(session, run_id)
    return run_service.run_figure(session, run, kind, choice, settings, log_x=log_x, log_y=log_y, clip=clip)


def _samples_csv(session, run_id: int) -> Iterator[bytes]:
    with open_stored_table(session, run_id) as parquet:
        yield from samples_csv_pieces(parquet)


def _started(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """``pieces`` with the first read now, while an error can still answer: a run whose table is gone (deleted
    while the download starts) is a 404, not a response cut off after its headers."""
    return itertools.chain([next(pieces, b"")], pieces)


@router.get("/{run_id}/samples.csv", name="samples_csv", responses=download("text/csv"))
def samples_csv(run_id: DatabaseInt, session: ReadSessionDep) -> StreamingResponse:
    """The samples as CSV, written from the stored Parquet a batch at a time while it is sent."""
    run = run_rows.get_run(session, run_id)
    return StreamingResponse(
        _started(_samples_csv(session, run.id)),
        media_type="text/csv",
        headers=attachment(f"run-{run.id}-samples.csv"),
    )


@router.get("/{run_id}/samples.parquet", name="samples_parquet", responses=download("application/vnd.apache.parquet"))
def samples_parquet(run_id: DatabaseInt, session: ReadSessionDep) -> StreamingResponse:
    """The stored Parquet, read from the database a piece at a time while it is sent."""
    run = run_rows.get_run(session, run_id)
    return StreamingResponse(
        _started(stored_table_pieces(session, run.id)),
        media_type="application/vnd.apache.parquet",
        headers=attachment(f"run-{run.id}-samples.parquet"),
    )


class RunDeletion(BaseModel):
    """What deleting a run does besides removing it."""

    run_id: int
    comparisons: list[dict[str, Any]] = Field(
        description="The saved comparisons it is in ({id, name, runs_left}): they show their other runs; one "
        "left without runs says so, and its share links answer 410."
    )


RELABEL_JOB_STARTED = {
    202: {
        "model": RelabelJobPublic,
        "description": "A huge run (its stored tables past EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES) relabelled or linked: "
        "the other fields are changed, its statistics are computed again by the returned job (Location); the run "
        "keeps its collectives, plan and statistics until the job succeeds.",
    }
}


@router.patch(
    "/{run_id}", name="change_run", response_model=RunPublic, responses={**IMPORT_ERRORS, **RELABEL_JOB_STARTED}
)
def change_run(
    run_id: DatabaseInt,
    changes: run_service.RunUpdate,
    session: WriteSessionDep,
    settings: SettingsDep,
    database: DatabaseDep,
) -> Any:
    """Rename, retag, annotate, state the fabric facts of, link or unlink a run, set its collectives or its
    platform (an editor's write). Only the fields given change; ``"platform": null`` clears it,
    ``"plan_id": null`` unlinks its plan. Relabelling or linking a huge run answers 202 with a relabel job
    (``GET /api/relabel-jobs/{job_id}``) that computes its statistics again."""
    given = changes.model_fields_set
    if not given:
        raise ValueError("changes: give at least one of " + ", ".join(run_service.RunUpdate.model_fields))
    limits = ImportLimits.from_settings(settings)
    run = run_rows.get_run(session, run_id)
    plan_id = (changes.plan_id or 0) if "plan_id" in given else None
    summarised_again = changes.collectives is not None or (plan_id is not None and (plan_id or None) != run.plan_id)
    if summarised_again and run_service.summarised_again_in_background(session, run_id, limits):
        return _relabel_job_started(session, database, run, changes, plan_id, limits)
    run = run_service.update_run(session, run_id, changes, limits)
    session.commit()
    return run_rows.run_public(run)


def _relabel_job_started(
    session: Session,
    database: Database,
    run: Run,
    changes: run_service.RunUpdate,
    plan_id: int | None,
    limits: ImportLimits,
) -> JSONResponse:
    """The huge run's relabelling and plan checked, its other fields changed and committed, then the job that
    computes its statistics again started: 202 with the job."""
    if changes.collectives is not None:
        run_service.check_relabelling(run, changes.collectives)
    target_plan = run.plan_id if plan_id is None else (plan_id or None)
    if target_plan is not None:
        get_plan(session, target_plan)
    RelabelJob.check_idle(database, run.id)
    # The job relabels and links; the rest changes now.
    now = changes.model_fields_set - {"collectives", "plan_id"}
    run_service.update_run(session, run.id, run_service.RunUpdate(**changes.model_dump(include=now)), limits)
    session.commit()  # before the job's own transactions: SQLite has one writer
    job = RelabelJob(database, run.id, changes.collectives or {}, target_plan, limits)
    document = RelabelJob.public(runner(database).start(database, job))
    return JSONResponse(jsonable_encoder(document), status_code=202, headers={"Location": document.url})


@router.get("/{run_id}/deletion", name="run_deletion", response_model=RunDeletion)
def run_deletion(run_id: DatabaseInt, session: ReadSessionDep) -> dict:
    """What ``DELETE /api/runs/{id}`` would do besides removing the run (what the page's confirmation says)."""
    return run_rows.run_deletion(session, run_id)


@router.delete("/{run_id}", name="delete_run", status_code=204)
def delete_run(run_id: DatabaseInt, session: WriteSessionDep) -> Response:
    """Delete the run (the admin role): its samples, statistics, tags and facts; comparisons show the rest of
    their runs (``GET /api/runs/{id}/deletion`` says which)."""
    run_rows.delete_run(session, run_id)
    session.commit()
    return Response(status_code=204)
