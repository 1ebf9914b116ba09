"""``emuplan platforms``: the platform profiles on the local database (built-in ones and those users add), the
same store calls and JSON as ``/api/platforms``."""

import json
from typing import Annotated

import typer

from emuplan.cli.app import app, in_store
from emuplan.cli.layout import wrap

platforms_app = typer.Typer(
    help="Platform profiles: what a run ran on (NVLink domain, NICs, latencies, verdict thresholds). Built-in "
    "profiles cite their vendor figures and cannot be changed; add your own (--from copies one).",
    no_args_is_help=True,
)
app.add_typer(platforms_app, name="platforms")

# The figures ``add`` and ``edit`` take, each an option named after the Platform field it sets.
Title = Annotated[str | None, typer.Option(help="How pages name it, e.g. 'H100 SXM + RoCE 400G'.")]
GpuModel = Annotated[str | None, typer.Option(help="The GPU, e.g. 'NVIDIA H100 SXM5'.")]
GpusPerNode = Annotated[int | None, typer.Option(help="GPUs per node (per compute tray on an NVL72).")]
DomainGpus = Annotated[
    int | None, typer.Option("--scale-up-domain-gpus", help="GPUs in one NVLink domain: 8 on a DGX, 72 on an NVL72.")
]
ScaleUpFabric = Annotated[str | None, typer.Option(help="e.g. 'NVLink 4'.")]
ScaleUpGBs = Annotated[
    float | None, typer.Option("--scale-up-gb-s", help="NVLink GB/s per GPU per direction (half the quoted figure).")
]
ScaleOutFabric = Annotated[str | None, typer.Option(help="e.g. 'InfiniBand NDR 400G'.")]
NicsPerNode = Annotated[int | None, typer.Option(help="Scale-out NICs per node.")]
NicGbits = Annotated[float | None, typer.Option("--nic-gbit-s", help="Each NIC's rate, Gbit/s.")]
GpuGeneration = Annotated[
    str | None,
    typer.Option(help="volta | ampere | hopper | blackwell, as NCCL's cost model groups GPUs (Ada: ampere)."),
]
ScaleUpLink = Annotated[str | None, typer.Option(help="nvlink | pcie: how a node's GPUs reach each other.")]
Nvls = Annotated[bool | None, typer.Option("--nvls/--no-nvls", help="NVLink SHARP (NVSwitch, Hopper on).")]
DegradedBelow = Annotated[
    float | None, typer.Option(help="% of expected at the large sizes below which a run is degraded.")
]
FailBelow = Annotated[float | None, typer.Option(help="% of expected at the large sizes below which a run fails.")]
Sources = Annotated[
    list[str] | None, typer.Option("--source", help="A datasheet title or URL the figures come from (repeat it).")
]
AsJson = Annotated[bool, typer.Option("--json", help="Print the API's JSON document.")]


def _given(**options) -> dict:
    """The options given on the command line, by the Platform field they set."""
    return {field: value for field, value in options.items() if value is not None}


def _figures_line(document: dict) -> str:
    return (
        f"{document['scale_up_fabric']} {document['scale_up_gb_s']:,g} GB/s in {document['scale_up_domain_gpus']} "
        f"GPUs; {document['scale_out_fabric']} {document['nics_per_node']} × {document['nic_gbit_s']:,g} Gbit/s "
        f"per {document['gpus_per_node']} GPUs = {document['scale_out_gb_s']:,g} GB/s per GPU"
    )


@platforms_app.command("list")
def list_platforms(as_json: AsJson = False) -> None:
    """Every profile: built-in ones first, then those added here, with how many runs name each."""
    from emuplan.store import platforms as store

    documents = in_store(lambda session: [entry.document() for entry in store.list_platforms(session)])
    if as_json:
        typer.echo(json.dumps(documents, indent=2))
        return
    width = max(len(document["name"]) for document in documents)
    for document in documents:
        kind = "built-in" if document["builtin"] else "added"
        # The figures wrap under the title, indented past the name, kind and count (80 columns: cli/layout.py).
        typer.echo(
            "\n".join(
                wrap(
                    f"{document['name']:<{width}}  {kind:<8}  {document['runs']:>5} runs  {document['title']}: "
                    f"{_figures_line(document)}",
                    hanging=" " * (width + 2),
                )
            )
        )


@platforms_app.command("show")
def show_platform(
    name: Annotated[str, typer.Argument(help="The platform's name (emuplan platforms list).")],
    ranks: Annotated[
        int | None, typer.Option(min=1, help="Also say which level bounds a collective over this many ranks.")
    ] = None,
    ranks_per_node: Annotated[int | None, typer.Option(min=1, help="With --ranks; default: full nodes.")] = None,
    as_json: AsJson = False,
) -> None:
    """One profile's figures, thresholds and sources."""
    from emuplan.store import platforms as store
    from emuplan.workload.platforms import ceiling_gbps

    def read(session) -> tuple[dict, dict | None]:
        entry = store.get_platform(session, name)
        ceiling = ceiling_gbps(entry.platform, ranks, ranks_per_node) if ranks is not None else None
        return entry.document(), ceiling.model_dump() if ceiling is not None else None

    document, ceiling = in_store(read)
    if as_json:
        typer.echo(json.dumps({**document, **({"ceiling": ceiling} if ceiling else {})}, indent=2))
        return
    typer.echo(f"{document['title']} ({document['name']}, {'built-in' if document['builtin'] else 'added'})")
    typer.echo(f"  GPU: {document['gpu_model']}, {document['gpus_per_node']} per node")
    typer.echo(f"  {_figures_line(document)} (per direction)")
    link = "NVLink" if document["scale_up_link"] == "nvlink" else "PCIe"
    nvls = ", NVLink SHARP" if document["nvls"] else ""
    typer.echo(f"  NCCL's model: {document['gpu_generation']} GPUs over {link}{nvls}")
    typer.echo(
        f"  verdict: degraded below {document['degraded_below_pct']:g} %, fails below "
        f"{document['fail_below_pct']:g} % of expected where bandwidth dominates"
    )
    typer.echo(f"  named by {document['runs']} runs and {document['plans']} plans")
    for number, source in enumerate(document["sources"], 1):
        typer.echo(f"  [{number}] {source}")
    if ceiling:
        typer.echo(
            f"  {ranks} ranks span {ceiling['nodes']} nodes in {ceiling['domains']} scale-up domains: bounded by "
            f"{ceiling['fabric']} ({ceiling['level']}), {ceiling['gb_s']:,g} GB/s per GPU per direction"
        )


@platforms_app.command("add")
def add_platform(
    name: Annotated[str, typer.Argument(help="Its name: lowercase letters, digits and hyphens.")],
    copy_from: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Start from this profile's figures and sources (a built-in's too); its title becomes NAME "
            "unless --title.",
        ),
    ] = None,
    title: Title = None,
    gpu_model: GpuModel = None,
    gpus_per_node: GpusPerNode = None,
    scale_up_domain_gpus: DomainGpus = None,
    scale_up_fabric: ScaleUpFabric = None,
    scale_up_gb_s: ScaleUpGBs = None,
    scale_out_fabric: ScaleOutFabric = None,
    nics_per_node: NicsPerNode = None,
    nic_gbit_s: NicGbits = None,
    gpu_generation: GpuGeneration = None,
    scale_up_link: ScaleUpLink = None,
    nvls: Nvls = None,
    degraded_below_pct: DegradedBelow = None,
    fail_below_pct: FailBelow = None,
    sources: Sources = None,
) -> None:
    """Add a profile: every figure given, or --from a profile and the figures that differ."""
    from emuplan.store import platforms as store

    given = _given(
        name=name, title=title, gpu_model=gpu_model, gpus_per_node=gpus_per_node,
        scale_up_domain_gpus=scale_up_domain_gpus, scale_up_fabric=scale_up_fabric, scale_up_gb_s=scale_up_gb_s,
        scale_out_fabric=scale_out_fabric, nics_per_node=nics_per_node, nic_gbit_s=nic_gbit_s,
        gpu_generation=gpu_generation, scale_up_link=scale_up_link, nvls=nvls,
        degraded_below_pct=degraded_below_pct, fail_below_pct=fail_below_pct, sources=sources,
    )  # fmt: skip

    def add(session) -> dict:
        base = dict(store.get_platform(session, copy_from).platform) if copy_from else {}
        if copy_from and "title" not in given:
            given["title"] = name
        return store.create_platform(session, {**base, **given}).document()

    document = in_store(add, write=True)
    typer.echo(f"platform {document['name']} added: {_figures_line(document)}")


@platforms_app.command("edit")
def edit_platform(
    name: Annotated[str, typer.Argument(help="The added profile to change (built-ins cannot be).")],
    new_name: Annotated[str | None, typer.Option("--name", help="Rename it (its runs and plans follow).")] = None,
    title: Title = None,
    gpu_model: GpuModel = None,
    gpus_per_node: GpusPerNode = None,
    scale_up_domain_gpus: DomainGpus = None,
    scale_up_fabric: ScaleUpFabric = None,
    scale_up_gb_s: ScaleUpGBs = None,
    scale_out_fabric: ScaleOutFabric = None,
    nics_per_node: NicsPerNode = None,
    nic_gbit_s: NicGbits = None,
    gpu_generation: GpuGeneration = None,
    scale_up_link: ScaleUpLink = None,
    nvls: Nvls = None,
    degraded_below_pct: DegradedBelow = None,
    fail_below_pct: FailBelow = None,
    sources: Sources = None,
) -> None:
    """Change the figures given (the rest stay); --source replaces all the sources."""
    from emuplan.store import platforms as store

    given = _given(
        name=new_name, title=title, gpu_model=gpu_model, gpus_per_node=gpus_per_node,
        scale_up_domain_gpus=scale_up_domain_gpus, scale_up_fabric=scale_up_fabric, scale_up_gb_s=scale_up_gb_s,
        scale_out_fabric=scale_out_fabric, nics_per_node=nics_per_node, nic_gbit_s=nic_gbit_s,
        gpu_generation=gpu_generation, scale_up_link=scale_up_link, nvls=nvls,
        degraded_below_pct=degraded_below_pct, fail_below_pct=fail_below_pct, sources=sources,
    )  # fmt: skip

    def edit(session) -> dict:
        current = dict(store.get_platform(session, name).platform)
        return store.update_platform(session, name, {**current, **given}).document()

    document = in_store(edit, write=True)
    typer.echo(f"platform {document['name']} saved: {_figures_line(document)}")


@platforms_app.command("remove")
def remove_platform(name: Annotated[str, typer.Argument(help="The added profile to delete.")]) -> None:
    """Delete an added profile; the runs and plans that name it are left with no platform."""
    from emuplan.store import platforms as store

    typer.echo(in_store(lambda session: store.delete_platform(session, name).message(), write=True))


@platforms_app.command("assign")
def assign_platform(
    name: Annotated[str, typer.Argument(help="The platform the runs ran on; 'none' clears it.")],
    run_ids: Annotated[list[int], typer.Argument(help="Run ids.")],
) -> None:
    """Name the platform runs ran on: their expected curve, % of expected and verdict follow."""
    from emuplan.services import runs as store

    platform = None if name == "none" else name

    def assign(session) -> list[str]:
        return [f"run {store.set_run_platform(session, run_id, platform).id}: platform {name}" for run_id in run_ids]

    typer.echo("\n".join(in_store(assign, write=True)))
