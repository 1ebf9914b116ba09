"""Measured runs: measure a stored plan on local processes and store the timings as a run.

The per-iteration CSV the workers write goes through the same ``parse_result_file`` and ``save_run``
as an upload, so a measured run gets the same statistics, figures and % of ideal as an imported KCCB
run. The run is stored only when the measurement finished: a failed, hung or cancelled measurement
raises before anything is written. The CLI calls ``measure_and_store``; the API's background jobs
take its two halves (``local_launcher``, kept to cancel it, then ``store_measurement``); the demo and
``emuplan measure --from-file`` (a torchrun result) call ``save_measured_run``.
"""

from collections.abc import Callable, Iterable
from typing import Any

from sqlmodel import Session

from emuplan.measure.launcher import LocalLauncher, MeasurementResult
from emuplan.measure.options import MeasurementOptions
from emuplan.measure.record import MeasurementSetup, measurement_setup, rank_timestamps
from emuplan.measure.workload import MeasurementError
from emuplan.results.analysis.stragglers import MEASURED_BASIS, rank_times_from_timestamps
from emuplan.results.formats import PER_ITERATION
from emuplan.results.parse import parse_result_file
from emuplan.services.imports import DuplicateRun, save_run, sha256_hex
from emuplan.store.db import Database
from emuplan.store.plans import get_plan, plan_document
from emuplan.store.runs import find_duplicate
from emuplan.store.tables import Plan, Run

MEASURED_FILE_NAME = "measured.csv"


def _hosts_text(hosts: list[str]) -> str:
    if len(hosts) == 1:
        return f"host {hosts[0]}"
    shown = ", ".join(hosts[:4]) + (", …" if len(hosts) > 4 else "")
    return f"{len(hosts)} hosts: {shown}"


def measured_origin_detail(setup: MeasurementSetup, launched_by: str) -> str:
    """'measured locally (gloo, world size 4, host vm, timed at SCHED_FIFO priority 1); 8 iterations after 2
    warm-up iterations (excluded)'."""
    policies = " / ".join(sorted(set(setup.scheduling)))  # ranks on different hosts may differ
    return (
        f"measured {launched_by} ({setup.backend}, world size {setup.world_size}, {_hosts_text(setup.hosts)}, "
        f"timed at {policies}); {setup.iterations} iterations after {setup.warmup} warm-up "
        f"iteration{'s' if setup.warmup != 1 else ''} (excluded)"
    )


def save_measured_run(
    session: Session,
    plan: Plan,
    csv_text: str,
    record: dict[str, Any],
    *,
    launched_by: str = "locally",
    notes: Iterable[str] = (),
    name: str | None = None,
    tags: Iterable[str] = (),
    file_name: str | None = None,
) -> Run:
    """Store a finished measurement of ``plan`` as a run with origin "measured" (caller commits).
    ``DuplicateRun`` when the same CSV is stored already (a torchrun result imported twice)."""
    source = f"{file_name or MEASURED_FILE_NAME} record"
    setup = measurement_setup(record, source)
    timestamps = rank_timestamps(record, setup, source)
    data = csv_text.encode()
    existing = find_duplicate(session, sha256_hex(data))
    if existing is not None:
        raise DuplicateRun(existing, file_name)
    parsed = parse_result_file(data, file_name or MEASURED_FILE_NAME, PER_ITERATION)
    # The CSV carries no set-up; the worker's record does, and busbw and % of ideal need the rank count.
    parsed.ranks = setup.world_size
    parsed.hosts = len(setup.hosts)
    parsed.warnings.extend(notes)
    if timestamps is not None:
        hosts = record.get("rank_hosts")
        if not (isinstance(hosts, list) and len(hosts) == setup.world_size and all(isinstance(h, str) for h in hosts)):
            hosts = [""] * setup.world_size
        parsed.rank_times = rank_times_from_timestamps(*timestamps, hosts)
        if parsed.rank_times["sample"].to_numpy().max() + 1 != parsed.samples.num_rows:
            raise MeasurementError(
                f"{source}: the timestamps cover other calls than the CSV's {parsed.samples.num_rows} rows"
            )
        parsed.rank_basis = MEASURED_BASIS
    return save_run(
        session,
        parsed,
        name=name or f"{plan.name}: measured {launched_by} ({setup.backend}, {setup.world_size} ranks)",
        plan_id=plan.id,
        strategy=plan.strategy,
        tags=tags,
        origin="measured",
        origin_detail=measured_origin_detail(setup, launched_by),
        file_name=file_name,
        content_sha256=sha256_hex(data),
        platform=plan.platform,
    )


def store_measurement(
    database: Database, plan_id: int, result: MeasurementResult, *, name: str | None = None, tags: Iterable[str] = ()
) -> Run:
    """Store a finished local measurement in one transaction."""
    with database.writing() as session:
        plan = get_plan(session, plan_id)
        return save_measured_run(
            session, plan, result.csv_text, result.record, notes=result.notes, name=name, tags=tags
        )


def local_launcher(
    database: Database,
    plan_id: int,
    options: MeasurementOptions,
    on_event: Callable[[dict[str, Any]], None] = lambda _event: None,
) -> LocalLauncher:
    """A launcher for the stored plan, its options already checked (nothing started yet)."""
    with database.read_session() as session:
        plan = get_plan(session, plan_id)
    if not plan.workload:
        raise MeasurementError(f"plan {plan_id} has no workload document to measure")
    return LocalLauncher([plan_document(plan).model_dump(mode="json")], options, on_event)


def measure_and_store(
    database: Database,
    plan_id: int,
    options: MeasurementOptions,
    on_event: Callable[[dict[str, Any]], None] = lambda _event: None,
    *,
    name: str | None = None,
    tags: Iterable[str] = (),
) -> Run:
    """Measure the plan on local processes, then store the run; raises before storing on any failure."""
    [result] = local_launcher(database, plan_id, options, on_event).run()
    return store_measurement(database, plan_id, result, name=name, tags=tags)
