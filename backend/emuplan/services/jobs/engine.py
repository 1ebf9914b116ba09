"""The one job engine: a ``Job`` subclass says what one kind of background job is (its name, what it holds, how it
runs, what it answers); ``JobRunner`` runs any of them on a thread of this worker, beside a heartbeat thread that
writes the job's stage and progress to its row (``store/jobs.py``) every ``HEARTBEAT_S`` and reads the cancel flag
any worker may set there, so a cancel sent to another worker reaches the job within that time.

A job's state: ``starting``, then its kind's stages as ``run`` reports them, then ``succeeded`` (with ``run``'s
result), ``cancelled`` (``run`` raised one of ``ends_cancelled``) or ``failed`` (any other error; an unexpected one
says so). The job's thread always ends it in one of them.
"""

import secrets
import threading
import weakref
from abc import ABC, abstractmethod
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, Field
from sqlalchemy.exc import OperationalError

from emuplan.store import jobs as job_store
from emuplan.store.db import Database, DatabaseBusy
from emuplan.store.jobs import HEARTBEAT_S, KEPT_FINISHED_JOBS, HoldTaken, JobBusy
from emuplan.store.tables import JobRecord


class JobContext:
    """What the job's thread sees of its job: its id, ``report`` for its stage and counters (written with the next
    heartbeat, a stage change at once), and ``cancelled``, set once a cancel was asked for."""

    def __init__(self, job_id: str, progress: dict[str, Any]) -> None:
        self.id = job_id
        self.cancelled = threading.Event()
        self.state_changed = threading.Event()
        self._state: str | None = None
        self._progress = dict(progress)
        self._lock = threading.Lock()  # the job's thread writes, the heartbeat's reads

    def report(self, state: str | None = None, **progress: Any) -> None:
        with self._lock:
            self._progress.update(progress)
            if state is not None:
                self._state = state
        if state is not None:
            self.state_changed.set()

    def snapshot(self) -> tuple[str | None, dict[str, Any]]:
        with self._lock:
            return self._state, dict(self._progress)


class Job(ABC):
    """One background job, and in its class what its kind is. A subclass sets the class attributes, takes what the
    job needs in ``__init__`` (checking it there: an error raised before ``JobRunner.start`` records nothing) and
    implements ``record``, ``run`` and ``public``."""

    kind: ClassVar[str]  # the row's kind, and how messages name the job ("no measurement job 'x'")
    url_prefix: ClassVar[str]  # where its jobs answer besides /api/jobs: GET and DELETE {url_prefix}/{id}
    initial_progress: ClassVar[dict[str, Any]]  # its counters before it reports any
    ends_cancelled: ClassVar[tuple[type[BaseException], ...]] = ()
    ends_failed: ClassVar[tuple[type[BaseException], ...]] = ()  # expected failures, their message as the error
    error_suffix: ClassVar[str] = ""  # added to the error of a job that did not succeed
    at_once: ClassVar[int | None] = None  # how many may run at once per server process (None: no bound)

    @abstractmethod
    def record(self) -> JobRecord:
        """The new row: ``request`` and what it works on (``plan_id`` or ``run_id``), and ``holds`` when only one
        active job may hold that."""

    @abstractmethod
    def run(self, database: Database, context: JobContext) -> dict[str, Any] | None:
        """Do the work on the job's thread, reporting through ``context`` and raising one of ``ends_cancelled`` soon
        after ``context.cancelled`` is set; the result, or None when the job marked itself succeeded in its last
        transaction (``store.jobs.succeed_unless_cancelled``)."""

    def cancel(self) -> None:  # noqa: B027 - most kinds need nothing besides the flag
        """What a cancel does on the worker running the job besides setting ``context.cancelled``."""

    def busy(self, holder: str) -> JobBusy:
        """The error of a start refused while job ``holder`` holds what this one would."""
        return JobBusy(f"a {self.kind} is already running (job {holder}); wait for it or cancel it", self.url(holder))

    @classmethod
    def url(cls, job_id: str) -> str:
        return f"{cls.url_prefix}/{job_id}"

    @classmethod
    @abstractmethod
    def public(cls, record: JobRecord) -> BaseModel:
        """The JSON its URLs answer with."""


class JobRunner:
    """The jobs this server process runs for one database, over their shared rows: the last few are kept, so a
    cancel on this worker reaches them at once and tests can look at them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, tuple[Job, JobContext]] = {}
        self._slots: dict[str, threading.Semaphore] = {}

    def start(self, database: Database, job: Job) -> JobRecord:
        """Record the job and start it on a thread of this worker; ``JobBusy`` when what it holds is held, or when
        ``at_once`` of its kind run here already."""
        slot = self._slot(job)
        if slot is not None and not slot.acquire(blocking=False):
            raise JobBusy(f"a {job.kind} is already running on this server; wait for it or cancel it")
        try:
            record = job.record()
            record.id, record.kind = secrets.token_hex(8), job.kind
            record.progress = {**job.initial_progress, **record.progress}
            try:
                record = job_store.create(database, record)
            except HoldTaken as taken:  # the holder may have ended since the insert: still busy for this start
                raise job.busy(taken.holder or "unknown") from None
            context = JobContext(record.id, record.progress)
            with self._lock:
                self._jobs[record.id] = (job, context)
                for old in list(self._jobs)[: max(0, len(self._jobs) - KEPT_FINISHED_JOBS)]:
                    del self._jobs[old]
            done = threading.Event()
            args = (database, job, context, done, slot)
            threading.Thread(target=self._run, args=args, daemon=True, name=f"{job.kind}-{record.id}").start()
        except BaseException:
            if slot is not None:
                slot.release()
            raise
        beat_args = (database, job, context, done)
        threading.Thread(target=self._heartbeat, args=beat_args, daemon=True, name=f"beat-{record.id}").start()
        return record

    def _slot(self, job: Job) -> threading.Semaphore | None:
        if job.at_once is None:
            return None
        with self._lock:
            return self._slots.setdefault(job.kind, threading.Semaphore(job.at_once))

    @staticmethod
    def _run(
        database: Database, job: Job, context: JobContext, done: threading.Event, slot: threading.Semaphore | None
    ) -> None:
        try:
            result = job.run(database, context)
        except job.ends_cancelled as error:
            outcome = {"state": "cancelled", "error": f"{error}{job.error_suffix}"}
        except job.ends_failed as error:
            outcome = {"state": "failed", "error": f"{error}{job.error_suffix}"}
        except Exception as error:  # noqa: BLE001 - a job thread must always end in a final state
            outcome = {"state": "failed", "error": f"unexpected error: {error!r}{job.error_suffix}"}
        else:
            if result is None:
                return  # ended in its own last transaction
            outcome = {"state": "succeeded", "result": result}
        finally:
            done.set()
            context.state_changed.set()
            if slot is not None:
                slot.release()
        _, progress = context.snapshot()
        job_store.finish(database, context.id, progress=progress, **outcome)

    @staticmethod
    def _heartbeat(database: Database, job: Job, context: JobContext, done: threading.Event) -> None:
        """Progress out, the cancel in, until the job's thread is done."""
        while not done.is_set():
            context.state_changed.clear()
            state, progress = context.snapshot()
            try:
                if job_store.beat(database, context.id, state, **progress):
                    context.cancelled.set()
                    job.cancel()
            except (DatabaseBusy, OperationalError):  # the database busy or unreachable a moment: the next beat retries
                pass
            # A state change is written at once; progress within a state every HEARTBEAT_S.
            context.state_changed.wait(HEARTBEAT_S)

    def job(self, job_id: str) -> Job:
        """A job this worker ran (tests look at its processes)."""
        return self._jobs[job_id][0]

    def cancel(self, database: Database, job_id: str, kind: str | None = None) -> JobRecord:
        """Cancel a running job, whichever worker runs it. Answers once the job has ended (or after
        ``store.jobs.CANCEL_WAIT_S``); a finished job stays as it is."""
        record = job_store.request_cancel(database, job_id, kind)
        with self._lock:
            running = self._jobs.get(job_id)
        if running is not None and job_store.is_active(record):
            job, context = running
            context.cancelled.set()
            job.cancel()
        return job_store.wait_while_active(database, record)


_RUNNERS: "weakref.WeakKeyDictionary[Database, JobRunner]" = weakref.WeakKeyDictionary()
_RUNNERS_LOCK = threading.Lock()


def runner(database: Database) -> JobRunner:
    """The runner of this process's jobs on ``database`` (one per app), made on first use: requests run on several
    threads, so the first two must not make two."""
    with _RUNNERS_LOCK:
        return _RUNNERS.setdefault(database, JobRunner())


class JobPublic(BaseModel):
    """Any job as ``/api/jobs/{id}`` answers it; its kind's own URL (``url``) answers with the kind's fields."""

    id: str
    kind: str = Field(description="What it runs: measurement, simulation or relabel.")
    state: str = Field(description="starting, then its kind's stages, then succeeded, failed or cancelled.")
    plan_id: int | None = Field(description="The plan it works on (a measurement, a simulation).")
    run_id: int | None = Field(description="The run it works on (a relabelling).")
    request: dict[str, Any] = Field(description="What was asked for, defaults filled in.")
    progress: dict[str, Any] = Field(description="Its kind's counters, e.g. ranks_done and ranks_total.")
    error: str | None
    result: dict[str, Any] | None = Field(description="What it produced, once succeeded.")
    started_at: datetime
    finished_at: datetime | None = Field(description="Set once it has ended: poll until it is.")

    @classmethod
    def of(cls, record: JobRecord) -> "JobPublic":
        return cls.model_validate(record, from_attributes=True)
