"""``emuplan export-workload``: a saved plan's training step as per-rank Chakra execution traces."""

from pathlib import Path
from typing import Annotated

import typer

from emuplan.cli.app import app, open_database
from emuplan.workload.chakra.gpus import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS


@app.command("export-workload")
def export_workload(
    plan_id: Annotated[int, typer.Argument(help="A saved plan's id (emuplan plan --save, or the web page).")],
    out: Annotated[Path, typer.Option(help="Folder to write the bundle into (created if missing).")],
    workload_format: str = typer.Option("chakra", "--format", help="Workload format: chakra."),
    gpu: str = typer.Option(DEFAULT_GPU, help=f"GPU whose dense bf16 peak times compute: {', '.join(GPUS)}."),
    utilisation: float = typer.Option(DEFAULT_UTILISATION, help="Fraction of the GPU's peak reached, in (0, 1]."),
    ranks: str = typer.Option(
        None, help="Ranks to write, e.g. 0-7 or 0,4,8-11. Default: all up to 16384 ranks, else one per pipeline stage."
    ),
) -> None:
    """Write one training step of a framework-mode plan as Chakra traces: workload.<rank>.et per rank,
    comm_groups.json (group id → ranks, as ASTRA-sim reads it), comm_group_names.json and README.txt."""
    # Imported here: protobuf and the planner are only needed once the command runs.
    from emuplan.store.workload_export import WORKLOAD_FORMATS, chakra_bundle
    from emuplan.workload.chakra.bundle import write_bundle

    if workload_format not in WORKLOAD_FORMATS:
        raise typer.BadParameter(f"use one of {', '.join(WORKLOAD_FORMATS)}", param_hint="--format")
    database = open_database()
    try:
        with database.read_session() as session:
            files = chakra_bundle(session, plan_id, gpu, utilisation, ranks, allow_files=True)
    except (LookupError, ValueError) as error:  # PlanNotFound, ExportError, UnknownModelError
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    finally:
        database.dispose()
    write_bundle(files, out)
    traces = sorted(name for name in files if name.endswith(".et"))
    typer.echo(f"wrote {len(traces)} trace file(s) and {len(files) - len(traces)} other file(s) to {out}")
