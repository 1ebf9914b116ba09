"""``emuplan platforms``: the platform profiles on the local database (built-in ones and those users add), the
same service calls and JSON as ``/api/platforms``."""

import inspect
import json
from collections.abc import Callable
from typing import Annotated, Literal

import typer

from emuplan.cli.app import app, in_store
from emuplan.cli.layout import wrap
from emuplan.workload.platform_fields import PLATFORM_FIELDS, PlatformField

platforms_app = typer.Typer(
    help="Platform profiles: what a run ran on (NVLink domain, NICs, latencies, verdict thresholds). Built-in "
    "profiles cite their vendor figures and cannot be changed; add your own (--from copies one).",
    no_args_is_help=True,
)
app.add_typer(platforms_app, name="platforms")


def _figure_option(name: str, spec: PlatformField) -> inspect.Parameter:
    """The option that sets the field ``name`` (none given: the field is left as it is, or to its default)."""
    flag = spec.option or f"--{name.replace('_', '-')}"
    if spec.type is bool:
        flag = f"{flag}/--no-{flag.removeprefix('--')}"
    given_as = list[str] if spec.type is list else Literal[tuple(spec.choices)] if spec.choices else spec.type
    # The choices are named in the help, so that the options' column stays narrow enough for their names.
    named = (
        f" One of: {', '.join(spec.choices)}."
        if spec.choices
        else " Repeat the option for each one."
        if spec.type is list
        else ""
    )
    option = typer.Option(None, flag, help=spec.description + named, metavar="<str>" if spec.choices else None)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=given_as | None)


# Every field but the name (the commands' argument, and edit's --name), each an option named after it.
FIGURE_OPTIONS = [_figure_option(name, spec) for name, spec in PLATFORM_FIELDS.items() if name != "name"]


def takes_figure_options(command: Callable[..., None]) -> Callable[..., None]:
    """Gives ``command`` (whose ``**figures`` receive them) an option for each field of ``FIGURE_OPTIONS``."""
    own = [p for p in inspect.signature(command).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    command.__signature__ = inspect.Signature([*own, *FIGURE_OPTIONS])
    return command


AsJson = Annotated[bool, typer.Option("--json", help="Print the API's JSON document.")]


def _given(figures: dict) -> dict:
    """The options given on the command line, by the Platform field they set."""
    return {field: value for field, value in figures.items() if value is not None}


def _figures_line(document: dict) -> str:
    return (
        f"{document['scale_up_fabric']} {document['scale_up_gb_s']:,g} GB/s in {document['scale_up_domain_gpus']} "
        f"GPUs; {document['scale_out_fabric']} {document['nics_per_node']} × {document['nic_gbit_s']:,g} Gbit/s "
        f"per {document['gpus_per_node']} GPUs = {document['scale_out_gb_s']:,g} GB/s per GPU"
    )


@platforms_app.command("list")
def list_platforms(as_json: AsJson = False) -> None:
    """Every profile: built-in ones first, then those added here, with how many runs name each."""
    from emuplan.services import platforms as service

    documents = in_store(lambda session: [entry.document() for entry in service.list_platforms(session)])
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
    from emuplan.services import platforms as service
    from emuplan.workload.platforms import ceiling_gbps

    def read(session) -> tuple[dict, dict | None]:
        entry = service.get_platform(session, name)
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
@takes_figure_options
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
    **figures,
) -> None:
    """Add a profile: every figure given, or --from a profile and the figures that differ."""
    from emuplan.services import platforms as service

    given = {"name": name, **_given(figures)}

    def add(session) -> dict:
        base = dict(service.get_platform(session, copy_from).platform) if copy_from else {}
        if copy_from and "title" not in given:
            given["title"] = name
        return service.create_platform(session, {**base, **given}).document()

    document = in_store(add, write=True)
    typer.echo(f"platform {document['name']} added: {_figures_line(document)}")


@platforms_app.command("edit")
@takes_figure_options
def edit_platform(
    name: Annotated[str, typer.Argument(help="The added profile to change (built-ins cannot be).")],
    new_name: Annotated[str | None, typer.Option("--name", help="Rename it (its runs and plans follow).")] = None,
    **figures,
) -> None:
    """Change the figures given (the rest stay); --source replaces all the sources."""
    from emuplan.services import platforms as service

    given = _given({"name": new_name, **figures})

    def edit(session) -> dict:
        current = dict(service.get_platform(session, name).platform)
        return service.update_platform(session, name, {**current, **given}).document()

    document = in_store(edit, write=True)
    typer.echo(f"platform {document['name']} saved: {_figures_line(document)}")


@platforms_app.command("remove")
def remove_platform(name: Annotated[str, typer.Argument(help="The added profile to delete.")]) -> None:
    """Delete an added profile; the runs and plans that name it are left with no platform."""
    from emuplan.services import platforms as service

    typer.echo(in_store(lambda session: service.delete_platform(session, name).message(), write=True))


@platforms_app.command("assign")
def assign_platform(
    name: Annotated[str, typer.Argument(help="The platform the runs ran on; 'none' clears it.")],
    run_ids: Annotated[list[int], typer.Argument(help="Run ids.")],
) -> None:
    """Name the platform runs ran on: their expected curve, % of expected and verdict follow."""
    from emuplan.services import runs as run_service

    platform = None if name == "none" else name

    def assign(session) -> list[str]:
        return [
            f"run {run_service.set_run_platform(session, run_id, platform).id}: platform {name}" for run_id in run_ids
        ]

    typer.echo("\n".join(in_store(assign, write=True)))
