"""``emuplan measure``: run a stored plan's collectives on local processes (or print the torchrun
command for a cluster) and store the timings as a measured run."""

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from emuplan.cli.app import app, fail, open_database
from emuplan.measure.options import (
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_RENDEZVOUS,
    MAX_LOCAL_WORLD_SIZE,
    MeasurementOptions,
    TimingScheduling,
    WorkloadSource,
)
from emuplan.wording import gbps, percent, time_in

if TYPE_CHECKING:
    from emuplan.store.db import Database
    from emuplan.store.tables import Run

HEAD_NODE_HINT = "replace HEAD_NODE with the address of the node that hosts rank 0's rendezvous"


def _progress_printer() -> Any:
    def on_event(event: dict[str, Any]) -> None:
        if event.get("event") == "launching":
            typer.echo(f"starting {event['world_size']} local processes (backend {event['backend']}) ...", err=True)
        elif event.get("event") == "started":
            typer.echo(
                f"  {event['world_size']} {event['backend']} processes up; {event['calls_per_iteration']} "
                f"collective(s) per iteration, {event['warmup']} warm-up + {event['iterations']} iterations",
                err=True,
            )
        elif event.get("event") == "iteration":
            phase = " (warm-up)" if event["warmup"] else ""
            typer.echo(f"  iteration {event['done']}/{event['total']}{phase}", err=True)

    return on_event


def _render_run(run: "Run") -> str:
    lines = [f"stored run {run.id}: {run.name}", f"  {run.origin_detail}"]
    lines += [f"  note: {warning}" for warning in run.warnings]
    for group in run.summary.get("groups", []):
        ideal = f", {percent(group['pct_of_ideal'])}% of ideal" if group.get("pct_of_ideal") is not None else ""
        busbw = f", busbw {gbps(group['busbw_gbps'])} GB/s" if group.get("busbw_gbps") is not None else ""
        lines.append(
            f"  {group['label']}: n={group['count']} p50 {time_in(group['p50_us'])} µs, p99 {time_in(group['p99_us'])} "
            f"µs, max {time_in(group['max_us'])} µs{busbw}{ideal}"
        )
    return "\n".join(lines)


def _print_torchrun(
    database: "Database",
    plan_id: int,
    options: MeasurementOptions,
    nnodes: int | None,
    nproc_per_node: int | None,
    rendezvous: str,
    plan_file: Path | None,
) -> None:
    from emuplan.measure.torchrun import torchrun_command
    from emuplan.store.plans import get_plan, plan_document

    with database.read_session() as session:
        plan = get_plan(session, plan_id)
    document = plan_document(plan)
    plan_file = plan_file or Path(f"plan-{plan_id}.json")
    plan_file.write_text(json.dumps(document.model_dump(mode="json"), indent=1))
    output = f"plan-{plan_id}-measured.csv"
    command = torchrun_command(
        str(plan_file),
        output,
        options,
        nnodes=nnodes or document.inputs.hosts,
        nproc_per_node=nproc_per_node or document.inputs.gpus_per_host,
        rendezvous=rendezvous,
        run_id=f"emuplan-plan-{plan_id}",
    )
    typer.echo(
        f"# wrote {plan_file}; copy it to every node (same path), install emuplan there, then run on each node\n"
        f"# ({HEAD_NODE_HINT}):\n{shlex.join(command)}\n\n"
        f"# rank 0 writes {output} (and {Path(output).with_suffix('.json')}) on its node. Store it as a measured run\n"
        f"# of this plan:\n"
        f"{shlex.join(['emuplan', 'measure', str(plan_id), '--from-file', output])}\n"
        f"# or import the CSV like any per-iteration file:\n"
        f"{shlex.join(['emuplan', 'import', output, '--plan', str(plan_id), '--strategy', plan.strategy])}"
    )


def _store_torchrun_result(
    database: "Database", plan_id: int, csv_path: Path, name: str | None, tags: list[str]
) -> "Run":
    from emuplan.measure.workload import MeasurementError
    from emuplan.services.measurements import save_measured_run
    from emuplan.store.plans import get_plan

    record_path = csv_path.with_suffix(".json")
    try:
        csv_text = csv_path.read_text()
        record = json.loads(record_path.read_text())
    except (OSError, ValueError) as error:
        raise MeasurementError(
            f"{error}; --from-file needs the CSV and the .json record rank 0 wrote beside it"
        ) from None
    with database.writing() as session:
        plan = get_plan(session, plan_id)
        return save_measured_run(
            session, plan, csv_text, record, launched_by="with torchrun", name=name, tags=tags, file_name=csv_path.name
        )


@app.command()
def measure(
    plan_id: Annotated[int, typer.Argument(help="Id of a stored plan (`emuplan plan ... --save`).")],
    world_size: Annotated[
        int, typer.Option("--world-size", help=f"Local processes, one rank each (at most {MAX_LOCAL_WORLD_SIZE}).")
    ] = MeasurementOptions.world_size,
    backend: Annotated[
        str, typer.Option(help="gloo, nccl, or auto: nccl when CUDA is available, else gloo.")
    ] = DEFAULT_BACKEND,
    iterations: Annotated[int | None, typer.Option(help="Measured iterations. Default: the plan's trials.")] = None,
    warmup: Annotated[
        int, typer.Option(help="Warm-up iterations, run first and not stored.")
    ] = MeasurementOptions.warmup,
    workload: Annotated[
        WorkloadSource,
        typer.Option(
            help="kccb: the KCCB export's data sizes (what KCCB runs); collectives: every planned "
            "collective count_per_step times, point-to-point sends included."
        ),
    ] = WorkloadSource.KCCB,
    timeout: Annotated[
        float, typer.Option(help="Seconds before a hung measurement is killed.")
    ] = MeasurementOptions.timeout_s,
    scheduling: Annotated[
        TimingScheduling,
        typer.Option(
            help="realtime: time the collectives with the workers' threads at SCHED_FIFO (needs root or "
            "CAP_SYS_NICE, else falls back to normal and the run says so), so no thread waits for another's "
            "time slice; normal: the default scheduler."
        ),
    ] = TimingScheduling.REALTIME,
    name: Annotated[str | None, typer.Option(help="Run name. Default: the plan's name and the set-up.")] = None,
    tag: Annotated[list[str], typer.Option(help="Tag for the run (repeatable).")] = [],  # noqa: B006
    as_json: Annotated[bool, typer.Option("--json", help="Print the stored run as JSON.")] = False,
    torchrun: Annotated[
        bool,
        typer.Option(
            "--torchrun",
            help="Do not measure here: write the plan file and print the torchrun "
            "command that measures it on a cluster, and how to store the result.",
        ),
    ] = False,
    nnodes: Annotated[int | None, typer.Option(help="--torchrun: nodes. Default: the plan's hosts.")] = None,
    nproc_per_node: Annotated[
        int | None, typer.Option(help="--torchrun: ranks per node. Default: the plan's GPUs per host.")
    ] = None,
    rdzv_endpoint: Annotated[str, typer.Option(help="--torchrun: rendezvous host:port.")] = DEFAULT_RENDEZVOUS,
    plan_file: Annotated[
        Path | None, typer.Option(help="--torchrun: where to write the plan JSON. Default: plan-ID.json.")
    ] = None,
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from-file",
            help="Store a torchrun result CSV (its .json record beside it) "
            "as a measured run of the plan instead of measuring.",
        ),
    ] = None,
) -> None:
    """Measure a plan's collectives with torch.distributed on local processes and store a measured run.

    Per collective: barrier, monotonic clock, the collective, clock; completion = max(end) − min(start).

    Progress goes to stderr; a failed, hung (--timeout) or interrupted measurement stores nothing.
    """
    from emuplan.measure.workload import MeasurementError
    from emuplan.results.canonical import ResultFileError
    from emuplan.services.imports import DuplicateRun
    from emuplan.services.measurements import measure_and_store
    from emuplan.settings import get_settings
    from emuplan.store.plans import PlanNotFound
    from emuplan.store.runs import RunInputError, run_public

    if backend not in BACKENDS:
        fail(f"--backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    options = MeasurementOptions(
        world_size=world_size,
        backend=backend,
        iterations=iterations,
        warmup=warmup,
        workload=workload,
        timeout_s=timeout,
        scheduling=scheduling,
        memory_mb=get_settings().measure_memory_mb,
    )
    database = open_database()
    try:
        if torchrun:
            _print_torchrun(database, plan_id, options, nnodes, nproc_per_node, rdzv_endpoint, plan_file)
            return
        if from_file is not None:
            run = _store_torchrun_result(database, plan_id, from_file, name, tag)
        else:
            run = measure_and_store(database, plan_id, options, _progress_printer(), name=name, tags=tag)
    except (PlanNotFound, MeasurementError, ResultFileError, RunInputError, DuplicateRun) as error:
        fail(str(error))
    except KeyboardInterrupt:
        typer.echo("interrupted: the workers were stopped and no run was stored", err=True)
        raise typer.Exit(130) from None
    finally:
        database.dispose()
    typer.echo(json.dumps(run_public(run), indent=2) if as_json else _render_run(run))
