"""``emuplan export-workload``: a saved plan's training step as per-rank Chakra execution traces."""

import tempfile
import zipfile
from pathlib import Path
from typing import Annotated

import typer

from emuplan.cli.app import app, open_database, remote_server
from emuplan.workload.chakra.gpus import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS


@app.command("export-workload")
def export_workload(
    plan_id: Annotated[int, typer.Argument(help="A saved plan's id (emuplan plan --save, or the web page).")],
    out: Annotated[
        Path, typer.Option(help="Folder to write the bundle into (created if missing), or a .zip file to stream it to.")
    ],
    workload_format: str = typer.Option("chakra", "--format", help="Workload format: chakra."),
    gpu: str = typer.Option(DEFAULT_GPU, help=f"GPU whose dense bf16 peak times compute: {', '.join(GPUS)}."),
    utilisation: float = typer.Option(DEFAULT_UTILISATION, help="Fraction of the GPU's peak reached, in (0, 1]."),
    ranks: str = typer.Option(
        None,
        help="Ranks to write: all, or e.g. 0-7 or 0,4,8-11. Default: all up to 16384 ranks, else one per pipeline "
        "stage.",
    ),
) -> None:
    """Write one training step of a framework-mode plan as Chakra traces: workload.<rank>.et per rank,
    comm_groups.json (group id → ranks, as ASTRA-sim reads it), comm_group_names.json and README.txt. With
    --server, the server's zip is streamed to disk as it arrives."""
    # Imported here: protobuf and the planner are only needed once the command runs.
    from emuplan.services.workload_export import WORKLOAD_FORMATS

    if workload_format not in WORKLOAD_FORMATS:
        raise typer.BadParameter(f"use one of {', '.join(WORKLOAD_FORMATS)}", param_hint="--format")
    as_zip = out.suffix.lower() == ".zip"
    if (server := remote_server()) is not None:
        params = {"format": workload_format, "gpu": gpu, "utilisation": utilisation, "ranks": ranks}
        names = _download(server, f"/api/plans/{plan_id}/workload", params, out, as_zip)
    else:
        names = _export_local(plan_id, gpu, utilisation, ranks, out, as_zip)
    traces = sum(name.endswith(".et") for name in names)
    typer.echo(f"wrote {traces} trace file(s) and {len(names) - traces} other file(s) to {out}")


def _export_local(plan_id: int, gpu: str, utilisation: float, ranks: str | None, out: Path, as_zip: bool) -> list[str]:
    from emuplan.services.workload_export import chakra_bundle
    from emuplan.workload.chakra.bundle import write_bundle, write_zip

    database = open_database()
    try:
        with database.read_session() as session:
            files = chakra_bundle(session, plan_id, gpu, utilisation, ranks, allow_files=True)
    except (LookupError, ValueError) as error:  # PlanNotFound, ExportError, UnknownModelError
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    finally:
        database.dispose()
    if as_zip:
        write_zip(files, out)
    else:
        write_bundle(files, out)
    return list(files)


def _download(server, path: str, params: dict, out: Path, as_zip: bool) -> list[str]:
    """The server's zip streamed to ``out``, or through a temporary file into the folder ``out``; its member names."""
    if as_zip:
        out.parent.mkdir(parents=True, exist_ok=True)
        server.download(path, params, out)
        with zipfile.ZipFile(out) as archive:
            return archive.namelist()
    with tempfile.TemporaryDirectory(prefix="emuplan-workload-") as folder:
        downloaded = Path(folder) / "bundle.zip"
        server.download(path, params, downloaded)
        with zipfile.ZipFile(downloaded) as archive:
            archive.extractall(out)  # member by member, each copied in pieces
            return archive.namelist()
