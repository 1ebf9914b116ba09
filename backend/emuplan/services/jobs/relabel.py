"""Relabel jobs: a huge run's collectives relabelled or its plan linked in the background, since summarising its
stored tables again takes a minute or more at 100 M rows. ``PATCH /api/runs/{id}`` answers 202 with the job when the
run's stored table is past the streamed-import threshold (``EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES``; smaller runs are
changed in the request); ``api/routes/relabel_jobs.py`` follows and cancels it. One job at a time per run (it holds
the run); the run changes only in the job's last transaction (``services.runs.summarise_again_streamed``).

Its stages: starting → copying (the stored tables read to disk, bytes_done of bytes_total) → summarising (DuckDB)
→ saving (the one transaction that changes the run)."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlmodel import Session

from emuplan.results.budget import ImportLimits
from emuplan.services.jobs.engine import Job, JobContext
from emuplan.services.runs import summarise_again_streamed
from emuplan.store import jobs as job_store
from emuplan.store import runs as run_rows
from emuplan.store.db import Database
from emuplan.store.jobs import JobBusy
from emuplan.store.tables import JobRecord

RelabelState = Literal["starting", "copying", "summarising", "saving", "succeeded", "failed", "cancelled"]


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


def _holds(run_id: int) -> str:
    return f"relabel of run {run_id}"


class RelabelJob(Job):
    kind = "relabel"
    url_prefix = "/api/relabel-jobs"
    initial_progress = {"bytes_done": 0, "bytes_total": None}
    ends_cancelled = (RelabelCancelled,)
    ends_failed = (LookupError, ValueError)  # RunNotFound, RunInputError, ResultFileTooLarge, ImportsBusy
    error_suffix = "; the run is unchanged"

    def __init__(
        self, database: Database, run_id: int, collectives: dict[str, str], plan_id: int | None, limits: ImportLimits
    ) -> None:
        self.request: dict[str, Any] = {"collectives": collectives} if collectives else {}
        with database.read_session() as session:
            if plan_id != run_rows.get_run(session, run_id).plan_id:
                self.request["plan_id"] = plan_id
            self.bytes_total = run_rows.stored_table_bytes(session, run_id)
        self.run_id, self.collectives, self.plan_id, self.limits = run_id, collectives, plan_id, limits

    @classmethod
    def check_idle(cls, database: Database, run_id: int) -> None:
        """``JobBusy`` while a job runs for the run (checked before a request changes anything)."""
        holder = job_store.holder(database, _holds(run_id))
        if holder is not None:
            raise cls._busy(run_id, holder)

    @classmethod
    def _busy(cls, run_id: int, holder: str) -> JobBusy:
        message = f"run {run_id} is being summarised again (job {holder}); wait for it or cancel it"
        return JobBusy(message, cls.url(holder))

    def busy(self, holder: str) -> JobBusy:
        return self._busy(self.run_id, holder)

    def record(self) -> JobRecord:
        return JobRecord(
            run_id=self.run_id,
            request=self.request,
            holds=_holds(self.run_id),
            progress={"bytes_total": self.bytes_total},
        )

    def run(self, database: Database, context: JobContext) -> None:
        context.report("copying")
        total, read = self.bytes_total, [0]  # bytes read of every table so far

        def on_read(size: int) -> None:
            if context.cancelled.is_set():
                raise RelabelCancelled("cancelled while reading the run's tables")
            read[0] = min(read[0] + size, total)
            context.report(bytes_done=read[0])

        def on_stage(state: str) -> None:
            if context.cancelled.is_set():
                raise RelabelCancelled(f"cancelled before {state}")
            context.report(state)

        def in_last_transaction(session: Session) -> None:
            if not job_store.succeed_unless_cancelled(session, context.id, context.snapshot()[1]):
                raise RelabelCancelled("cancelled before saving")

        summarise_again_streamed(
            database, self.run_id, self.collectives, self.plan_id, self.limits,
            on_read=on_read, on_stage=on_stage, in_last_transaction=in_last_transaction,
        )  # fmt: skip

    @classmethod
    def public(cls, record: JobRecord) -> RelabelJobPublic:
        url = cls.url(record.id)
        return RelabelJobPublic.model_validate(
            {**record.model_dump(), **record.progress, "url": url, "cancel_url": url}
        )
