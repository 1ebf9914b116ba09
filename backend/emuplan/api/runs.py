"""Runs: upload a result file, list, read statistics and figures, export samples, compare, delete.

Glue only: parsing, statistics and figures live in ``results/`` and ``charts/``, storage in
``store/runs.py``. Errors: a bad file → 400 (413 past the decompressed-size cap) naming file, row and
column; bad form fields → 422; an identical file already imported → 409 with ``existing_run_id``.
"""

import io
from typing import Annotated, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from fastapi import APIRouter, File, Form, HTTPException, Query, Response, UploadFile
from fastapi.responses import JSONResponse

from emuplan.api.deps import ReadSessionDep, SettingsDep, WriteSessionDep
from emuplan.results import ResultFileError
from emuplan.results.headers import parse_column_map
from emuplan.store import runs as store
from emuplan.store.models import Run

router = APIRouter(tags=["runs"])

# Spreadsheets run a cell starting with one of these as a formula (CSV injection).
_FORMULA_START = r"^[=+\-@\t\r]"


def _run_or_404(session, run_id: int) -> Run:
    try:
        return store.get_run(session, run_id)
    except store.RunNotFound as error:
        raise HTTPException(status_code=404, detail=str(error)) from None


def parse_tags(text: str | None) -> list[str]:
    return [tag.strip() for tag in (text or "").split(",") if tag.strip()]


@router.post("/api/runs", status_code=201)
def upload_run(
    session: WriteSessionDep,
    settings: SettingsDep,
    file: Annotated[
        UploadFile,
        File(description="The result file (CSV, .csv.gz, Feather, nccl-tests log or -J JSON, ns-3 fct.txt)."),
    ],
    name: Annotated[str | None, Form(max_length=200)] = None,
    plan_id: Annotated[int | None, Form()] = None,
    strategy: Annotated[Literal["data", "tensor", "pipeline", "hybrid"] | None, Form()] = None,
    tags: Annotated[str | None, Form(description="Comma-separated.")] = None,
    fmt: Annotated[
        str | None,
        Form(
            alias="format",
            description="Skip detection: per-iteration, kai-summary, per-flow, ns3-fct, nccl-tests, nccl-tests-json.",
        ),
    ] = None,
    column_map: Annotated[
        str | None, Form(description='Role → column, JSON or "duration=wall_ms,size=payload".')
    ] = None,
    collective: Annotated[str | None, Form(description="The collective when the file does not name it.")] = None,
):
    file_name = file.filename or "upload"
    data = file.file.read()
    try:
        run = store.import_result_file(
            session,
            data,
            file_name,
            name=name,
            plan_id=plan_id,
            strategy=strategy,
            tags=parse_tags(tags),
            fmt=fmt or None,
            column_map=parse_column_map(column_map),
            collective=collective or None,
            max_decompressed_bytes=settings.max_decompressed_bytes,
        )
    except store.DuplicateRun as duplicate:
        return JSONResponse(
            status_code=409, content={"detail": str(duplicate), "existing_run_id": duplicate.existing_run_id}
        )
    except ResultFileError as error:
        raise HTTPException(status_code=error.status_code, detail=str(error)) from None
    except ValueError as error:  # form fields: strategy, plan_id, column_map
        raise HTTPException(status_code=422, detail=str(error)) from None
    session.commit()
    return store.run_public(run)


@router.get("/api/runs")
def list_runs(
    session: ReadSessionDep,
    strategy: str | None = None,
    plan: Annotated[int | None, Query(description="Only runs linked to this plan id.")] = None,
    tag: str | None = None,
) -> list[dict]:
    return [store.run_public(run) for run in store.list_runs(session, strategy=strategy, plan_id=plan, tag=tag)]


@router.get("/api/runs/{run_id}")
def get_run(run_id: int, session: ReadSessionDep) -> dict:
    return store.run_public(_run_or_404(session, run_id))


@router.get("/api/runs/{run_id}/stats")
def run_stats(run_id: int, session: ReadSessionDep) -> dict:
    return store.run_statistics(_run_or_404(session, run_id))


@router.get("/api/runs/{run_id}/figures/{kind}")
def run_figure(
    run_id: int, kind: Literal["cdf", "delay", "bandwidth"], session: ReadSessionDep, log_x: bool = False
) -> dict:
    return store.run_figure(_run_or_404(session, run_id), kind, log_x=log_x)


def neutralise_formulas(table: pa.Table) -> pa.Table:
    """Prefix text cells a spreadsheet would run as a formula with a quote."""
    for index, field in enumerate(table.schema):
        if pa.types.is_string(field.type):
            column = table.column(index)
            risky = pc.match_substring_regex(column, _FORMULA_START)
            table = table.set_column(
                index, field, pc.if_else(risky, pc.binary_join_element_wise("'", column, ""), column)
            )
    return table


@router.get("/api/runs/{run_id}/samples.csv")
def samples_csv(run_id: int, session: ReadSessionDep) -> Response:
    run = _run_or_404(session, run_id)
    sink = io.BytesIO()
    pacsv.write_csv(neutralise_formulas(store.load_samples(session, run.id)), sink)
    return Response(
        sink.getvalue(),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="run-{run.id}-samples.csv"'},
    )


@router.get("/api/runs/{run_id}/samples.parquet")
def samples_parquet(run_id: int, session: ReadSessionDep) -> Response:
    run = _run_or_404(session, run_id)
    return Response(
        store.samples_parquet(session, run.id),
        media_type="application/vnd.apache.parquet",
        headers={"Content-Disposition": f'attachment; filename="run-{run.id}-samples.parquet"'},
    )


@router.delete("/api/runs/{run_id}", status_code=204)
def delete_run(run_id: int, session: WriteSessionDep) -> Response:
    try:
        store.delete_run(session, run_id)
    except store.RunNotFound as error:
        raise HTTPException(status_code=404, detail=str(error)) from None
    session.commit()
    return Response(status_code=204)


def parse_run_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise HTTPException(status_code=422, detail=f"runs: expected comma-separated run ids, got {text!r}") from None
    if not ids:
        raise HTTPException(status_code=422, detail="runs: choose at least one run to compare")
    return ids


@router.get("/api/compare")
def compare(
    session: ReadSessionDep,
    runs: Annotated[str, Query(description="Comma-separated run ids, e.g. 1,2,3.")],
    baseline: int | None = None,
    log_x: bool = False,
) -> dict:
    try:
        return store.compare_stored_runs(session, parse_run_ids(runs), baseline, log_x=log_x)
    except store.RunNotFound as error:
        raise HTTPException(status_code=404, detail=str(error)) from None
    except ValueError as error:
        raise HTTPException(status_code=422, detail=str(error)) from None
