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
from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

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


class UploadForm(BaseModel):
    """The form fields next to ``file`` in ``POST /api/runs`` (all optional)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=200)
    plan_id: int | None = None
    strategy: Literal["data", "tensor", "pipeline", "hybrid"] | None = None
    tags: str | None = Field(default=None, description="Comma-separated.")
    format: str | None = Field(
        default=None,
        description="Skip detection: per-iteration, kai-summary, per-flow, ns3-fct, nccl-tests, nccl-tests-json.",
    )
    column_map: str | None = Field(default=None, description='Role → column, JSON or "duration=wall_ms,size=payload".')
    collective: str | None = Field(default=None, description="The collective when the file does not name it.")


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
                            "type": "string",
                            "format": "binary",
                            "description": "CSV (.csv.gz), Feather, nccl-tests log or -J JSON, ns-3 fct.txt.",
                        },
                        **UploadForm.model_json_schema()["properties"],
                    },
                }
            }
        },
    }
}


async def read_upload(request: Request) -> tuple[str, bytes | memoryview, UploadForm]:
    """The multipart body parsed in memory: (file name, file bytes, form fields).

    Starlette's form parser spools file parts to disk past 1 MiB; a result file is parsed from memory
    right after, so writing it out and reading it back would only cost time (it doubled the import time
    of a 100 MB CSV). The body size is capped while it streams in (``BodySizeLimitMiddleware``).
    """
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    if content_type != b"multipart/form-data" or b"boundary" not in options:
        raise HTTPException(
            status_code=415, detail="Send the result file as multipart/form-data in a field named 'file'."
        )
    body = await request.body()
    parts: list[dict] = []
    header: dict[str, bytearray] = {}

    def on_part_begin() -> None:
        parts.append({"headers": {}, "spans": []})

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header.setdefault("field", bytearray()).extend(data[start:end])

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header.setdefault("value", bytearray()).extend(data[start:end])

    def on_header_end() -> None:
        parts[-1]["headers"][bytes(header.pop("field", b"")).lower()] = bytes(header.pop("value", b""))

    def on_part_data(data: bytes, start: int, end: int) -> None:
        # The parser hands out (buffer, start, end): keep the positions, copy nothing.
        parts[-1]["spans"].append((data, start, end))

    parser = MultipartParser(
        options[b"boundary"],
        {
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_part_data": on_part_data,
        },
    )
    try:
        parser.write(body)
        parser.finalize()
    except MultipartParseError as error:
        raise HTTPException(status_code=400, detail=f"Malformed multipart body: {error}") from None
    file_name, data, fields = None, None, {}
    for part in parts:
        _, disposition = parse_options_header(part["headers"].get(b"content-disposition", b""))
        field = disposition.get(b"name", b"").decode("utf-8", errors="replace")
        spans = part["spans"]
        if len(spans) == 1:
            buffer, start, end = spans[0]
            content = memoryview(buffer)[start:end]  # the file stays where the body already is
        else:
            content = b"".join(buffer[start:end] for buffer, start, end in spans)
        if field == "file":
            file_name = disposition.get(b"filename", b"upload").decode("utf-8", errors="replace") or "upload"
            data = content
        elif content:
            fields[field] = bytes(content).decode("utf-8", errors="replace")
    if data is None:
        raise HTTPException(status_code=422, detail="file: the upload has no part named 'file'")
    try:
        form = UploadForm.model_validate(fields)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors(include_url=False))
        raise HTTPException(status_code=422, detail=problems) from None
    return file_name, data, form


@router.post("/api/runs", status_code=201, openapi_extra=UPLOAD_OPENAPI)
async def upload_run(request: Request, session: WriteSessionDep, settings: SettingsDep):
    file_name, data, form = await read_upload(request)
    return await run_in_threadpool(_import_upload, session, settings, file_name, data, form)


def _import_upload(session, settings, file_name: str, data: bytes | memoryview, form: UploadForm):
    try:
        run = store.import_result_file(
            session,
            data,
            file_name,
            name=form.name,
            plan_id=form.plan_id,
            strategy=form.strategy,
            tags=parse_tags(form.tags),
            fmt=form.format,
            column_map=parse_column_map(form.column_map),
            collective=form.collective,
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
    response: Response,
    strategy: str | None = None,
    plan: Annotated[int | None, Query(description="Only runs linked to this plan id.")] = None,
    tag: str | None = None,
    limit: Annotated[
        int, Query(ge=1, le=store.MAX_RUNS_PER_PAGE, description="Runs per page, newest first.")
    ] = store.RUNS_PER_PAGE,
    offset: Annotated[int, Query(ge=0, description="Runs to skip (limit × page number).")] = 0,
) -> list[dict]:
    """One page of runs, newest first; the ``X-Total-Count`` header says how many match in all."""
    filters = {"strategy": strategy, "plan_id": plan, "tag": tag}
    response.headers["X-Total-Count"] = str(store.count_runs(session, **filters))
    return [store.run_public(run) for run in store.list_runs(session, **filters, limit=limit, offset=offset)]


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
    return store.run_figure(session, _run_or_404(session, run_id), kind, log_x=log_x)


def neutralise_formulas(table: pa.Table) -> pa.Table:
    """Prefix text cells a spreadsheet would run as a formula with a quote."""
    for index, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type) and pa.types.is_string(field.type.value_type):
            # Only the distinct values need checking; the codes stay as they are.
            column = table.column(index).combine_chunks()
            values = column.dictionary
            risky = pc.match_substring_regex(values, _FORMULA_START)
            safe = pc.if_else(risky, pc.binary_join_element_wise("'", values, ""), values)
            table = table.set_column(index, field, pa.DictionaryArray.from_arrays(column.indices, safe))
        elif pa.types.is_string(field.type):
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
