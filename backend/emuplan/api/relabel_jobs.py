"""Relabel jobs: a huge run's collectives relabelled or its plan linked in the background, since summarising its
stored tables again takes a minute or more at 100 M rows. ``PATCH /api/runs/{id}`` answers 202 with the job when
the run's stored table is past the streamed-import threshold (``EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES``; smaller runs
are changed in the request); ``GET /api/relabel-jobs/{job_id}`` reports state and progress;
``DELETE /api/relabel-jobs/{job_id}`` cancels. Any server worker answers them (state in ``store/relabel_jobs.py``);
the job runs on a thread of the worker that started it, beside a heartbeat thread (``api/job_threads.py``). The run
changes only in the job's last transaction (``services.runs.summarise_again_streamed``)."""

import secrets
import threading
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from sqlmodel import Session

from emuplan.api.access import requires_roles
from emuplan.api.deps import DatabaseDep, DatabaseInt
from emuplan.api.job_threads import JobProgress, heartbeat
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.results.budget import ImportLimits
from emuplan.services import runs as store
from emuplan.store import relabel_jobs as job_store
from emuplan.store import runs as run_rows
from emuplan.store.db import Database
from emuplan.store.models import RelabelJobRecord

RelabelState = Literal["starting", "copying", "summarising", "saving", "succeeded", "failed", "cancelled"]
router = APIRouter(
    prefix="/api/relabel-jobs", tags=["runs"], dependencies=requires_roles(), responses=errors(*SIGNED_IN, 404, 422)
)


class RelabelCancelled(Exception):
    """Raised on the job's thread where it next looks at the cancel flag."""


class RelabelJobPublic(BaseModel):
    id: str
    run_id: int
    state: RelabelState
    request: dict[str, Any] = Field(
        description='What the job changes: {"collectives": {old: new}} and/or {"plan_id": id or null}.'
    )
    bytes_done: int = Field(
        description="Bytes of the run's stored tables read so far (state copying); their footers, read first, are "
        "counted too, so it reaches bytes_total a little early."
    )
    bytes_total: int | None = Field(description="Bytes of the run's stored tables.")
    error: str | None
    started_at: datetime
    finished_at: datetime | None
    url: str = Field(description="GET it for the state; DELETE it (cancel_url) to cancel.")
    cancel_url: str


def public(record: RelabelJobRecord) -> RelabelJobPublic:
    url = f"/api/relabel-jobs/{record.id}"
    return RelabelJobPublic.model_validate({**record.model_dump(), "url": url, "cancel_url": url})


def start(
    database: Database, run_id: int, collectives: dict[str, str], plan_id: int | None, limits: ImportLimits
) -> RelabelJobRecord:
    """Record the job (``RelabelBusy`` while another runs for the run) and start it on this worker."""
    request: dict[str, Any] = {"collectives": collectives} if collectives else {}
    with database.read_session() as session:
        run = run_rows.get_run(session, run_id)
        if plan_id != run.plan_id:
            request["plan_id"] = plan_id
        total = run_rows.stored_table_bytes(session, run_id)
    job_id = secrets.token_hex(8)
    record = job_store.create_job(database, job_id, run_id, request, total)
    progress, cancel, done = JobProgress(), threading.Event(), threading.Event()
    progress.update(state="copying")
    args = (database, job_id, run_id, collectives, plan_id, limits, total, progress, cancel, done)
    threading.Thread(target=_run, args=args, daemon=True, name=f"relabel-{job_id}").start()
    beat = partial(job_store.beat, database)
    threading.Thread(
        target=heartbeat, args=(beat, job_id, progress, cancel.set, done), daemon=True, name=f"beat-{job_id}"
    ).start()
    return record


def _run(
    database: Database,
    job_id: str,
    run_id: int,
    collectives: dict[str, str],
    plan_id: int | None,
    limits: ImportLimits,
    total: int,
    progress: JobProgress,
    cancel: threading.Event,
    done: threading.Event,
) -> None:
    read = [0]  # bytes read of every table so far

    def on_read(size: int) -> None:
        if cancel.is_set():
            raise RelabelCancelled("cancelled while reading the run's tables")
        read[0] = min(read[0] + size, total)
        progress.update(bytes_done=read[0])

    def on_stage(state: str) -> None:
        if cancel.is_set():
            raise RelabelCancelled(f"cancelled before {state}")
        progress.update(state=state)

    def in_last_transaction(session: Session) -> None:
        if not job_store.succeed_unless_cancelled(session, job_id, bytes_done=read[0]):
            raise RelabelCancelled("cancelled before saving")

    try:
        store.summarise_again_streamed(
            database, run_id, collectives, plan_id, limits,
            on_read=on_read, on_stage=on_stage,
            in_last_transaction=in_last_transaction,
        )  # fmt: skip
    except RelabelCancelled as error:
        outcome = {"state": "cancelled", "error": f"{error}; the run is unchanged"}
    except (LookupError, ValueError) as error:  # RunNotFound, RunInputError, ResultFileTooLarge, ImportsBusy
        outcome = {"state": "failed", "error": f"{error}; the run is unchanged"}
    except Exception as error:  # noqa: BLE001 - a job thread must always end in a final state
        outcome = {"state": "failed", "error": f"unexpected error: {error!r}; the run is unchanged"}
    else:
        return  # ended in the transaction that changed the run
    finally:
        done.set()
        progress.state_changed.set()
    last = {key: value for key, value in progress.snapshot().items() if key != "state"}
    job_store.finish(database, job_id, **last, **outcome)


@router.get("", response_model=list[RelabelJobPublic])
def list_relabel_jobs(
    database: DatabaseDep, run_id: Annotated[DatabaseInt | None, Query(description="Only this run's.")] = None
) -> list[RelabelJobPublic]:
    """The last relabel jobs (of one run, when given), running ones included, newest first."""
    return [public(job) for job in job_store.list_jobs(database, run_id)]


@router.get("/{job_id}", response_model=RelabelJobPublic)
def get_relabel_job(job_id: str, database: DatabaseDep) -> RelabelJobPublic:
    return public(job_store.read_job(database, job_id))


@router.delete("/{job_id}", response_model=RelabelJobPublic)
def cancel_relabel_job(job_id: str, database: DatabaseDep) -> RelabelJobPublic:
    """Cancel a running relabel job, whichever server worker runs it: the run stays as it was. Answers once the
    job has ended (at most ~15 s: DuckDB's summary is not interrupted, the job ends after it); a finished job is
    returned as it is."""
    job = job_store.request_cancel(database, job_id)
    return public(job_store.wait_while_active(database, job))
