"""``emuplan plan``: plan a KCCB emulation from a preset or a model file (config.json, safetensors, ONNX,
PyTorch source run in the sandbox)."""

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from emuplan.cli.app import app, fail, open_database, remote_server
from emuplan.cli.layout import Column, set_wide, table, wrap
from emuplan.wording import plural, time_in
from emuplan.workload.plan_options import (
    EXPORT_FORMATS,
    PLAN_OPTIONS,
    DataParallelImpl,
    MegatronCore,
    Mode,
    OptionGroup,
    Strategy,
)
from emuplan.workload.presets import PRESETS

if TYPE_CHECKING:
    from emuplan.workload.document import PlanDocument


def render_plan(document: "PlanDocument") -> str:
    """The readable form: summary, collectives table, then the KCCB settings to paste; fitted to the terminal
    (the phase and the whole buffer's bytes are the columns left out first)."""
    inputs = document.inputs
    lines = [
        *wrap(
            f"{document.model.name}: {document.model.parameter_count:,} parameters, "
            f"{document.model.parameter_bytes:,} bytes ({inputs.param_dtype})"
        ),
        *wrap(
            f"strategy {document.strategy.value}, mode {document.mode.value}; {plural(inputs.gpus, 'GPU')} on "
            f"{plural(inputs.hosts, 'host')} × {inputs.gpus_per_host}; tp {inputs.tp} pp {inputs.pp} dp {inputs.dp}"
            + (f" ep {inputs.ep}" if inputs.ep > 1 else "")
            + f"; micro-batch {inputs.micro_batch} × {inputs.micro_batches}"
        ),
        *wrap(
            f"network: {document.network.link_gbps:g} Gbit/s per rank, α = {document.network.latency_us:g} µs "
            "(--link-gbps, --latency-us: what the ideal µs column assumes)"
        ),
        f"trials: {document.trials}",
    ]
    if document.pipeline_bubble is not None:
        lines.append(f"pipeline bubble: {document.pipeline_bubble:.3f}")
    rows = [
        [
            item.label,
            item.op.value,
            f"{item.bytes_total:,}",
            f"{item.bytes_per_rank:,}",
            str(item.count_per_step),
            item.phase.value,
            f"{item.parallel_dim.value}×{item.group_size}",
            time_in(item.ideal_time_us),
        ]
        for item in document.collectives
    ]
    columns = [
        Column("collective"),
        Column("op"),
        Column("bytes_total", numeric=True, optional=True),
        Column("bytes/rank", numeric=True),
        Column("count", numeric=True),
        Column("phase", optional=True),
        Column("group"),
        Column("ideal µs", numeric=True),
    ]
    lines += [
        "",
        *table(columns, rows, indent="", rule=True),
        "",
        f"KCCB ({plural(document.kccb_trials, 'trial configuration')}, from the {document.kccb_source} list):",
    ]
    settings_indent = " " * 15
    for trial in document.kccb_list():
        lines += [
            f"  algorithm    {trial.algorithm} ({trial.algorithm_id})",
            *wrap(f"  data sizes   {trial.data_sizes}", hanging=settings_indent),
            f"  iterations   {trial.iterations}",
            f"  hosts        {plural(trial.hosts, 'host')} × {plural(trial.gpus_per_host, 'GPU')} per host",
            *wrap(f"  note         {trial.note}", hanging=settings_indent),
            "",
        ]
    if document.captured:
        captured_rows = [
            [item.label, item.op.value, f"{item.bytes_total:,}", f"{item.bytes_per_rank:,}", item.phase.value]
            for item in document.captured
        ]
        captured_columns = [
            Column("collective"),
            Column("op"),
            Column("bytes_total", numeric=True, optional=True),
            Column("bytes/rank", numeric=True),
            Column("phase", optional=True),
        ]
        lines += [
            "captured by PyTorch (fake process group; the truth where it differs):",
            *table(captured_columns, captured_rows, indent="", rule=True),
            *wrap("differences: " + ("; ".join(document.capture_differences) or "none")),
            "",
        ]
    lines += ["notes:", *(line for note in document.notes for line in wrap(note, indent="  - ", hanging="    "))]
    return "\n".join(lines)


def _request_option(field: str, *names: str, **kwargs):
    """A ``PlanRequest`` field as an option: its short help and its panel are the field's own, so the
    CLI, the API and the plan page describe and group it alike."""
    option = PLAN_OPTIONS[field]
    return typer.Option(*names, help=option.description, rich_help_panel=option.group, **kwargs)


def _choice_option(field: str, choices: type[StrEnum]):
    """An enumeration as an option: its choices in the help, so that the name column stays narrow."""
    option = PLAN_OPTIONS[field]
    return typer.Option(
        help=f"{option.description} One of: {', '.join(choices)}.",
        metavar=field.upper().replace("_", "-"),
        rich_help_panel=option.group,
    )


MODEL_PANEL = OptionGroup.MODEL.value
OUTPUT_PANEL = "Output"


def in_cli_words(message: str) -> str:
    """A planner message names its field first ("batch_size: ..."); the CLI names the option."""
    field, separator, rest = message.partition(": ")
    return f"--{field.replace('_', '-')}: {rest}" if separator and field in PLAN_OPTIONS else message


@app.command()
def plan(
    context: typer.Context,
    model: Annotated[
        str | None,
        typer.Option(
            help=f"A preset ({', '.join(PRESETS)}) or a model file: config.json, .safetensors, .onnx, .py.",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = None,
    model_class: Annotated[
        str | None, typer.Option(help=".py: the nn.Module class to build.", rich_help_panel=MODEL_PANEL)
    ] = None,
    model_kwargs: Annotated[
        str | None, typer.Option(help=".py: constructor keyword arguments as JSON.", rich_help_panel=MODEL_PANEL)
    ] = None,
    input_shape: Annotated[
        str | None, typer.Option(help=".py: one sample's shape, e.g. 1,28,28.", rich_help_panel=MODEL_PANEL)
    ] = None,
    input_dtype: Annotated[str, typer.Option(help=".py: the input's dtype.", rich_help_panel=MODEL_PANEL)] = "float32",
    label_dtype: Annotated[str, typer.Option(help=".py: the labels' dtype.", rich_help_panel=MODEL_PANEL)] = "int64",
    list_presets: Annotated[
        bool, typer.Option("--list-presets", help="List the presets and exit.", rich_help_panel=MODEL_PANEL)
    ] = False,
    mode: Annotated[Mode | None, _choice_option("mode", Mode)] = None,
    dataset_size: Annotated[int | None, _request_option("dataset_size")] = None,
    batch_size: Annotated[int | None, _request_option("batch_size")] = None,
    epochs: Annotated[int | None, _request_option("epochs")] = None,
    drop_last: Annotated[bool, _request_option("drop_last", "--drop-last")] = False,
    seq_len: Annotated[int | None, _request_option("seq_len")] = None,
    gpus: Annotated[int | None, _request_option("gpus")] = None,
    hosts: Annotated[int | None, _request_option("hosts")] = None,
    gpus_per_host: Annotated[int | None, _request_option("gpus_per_host")] = None,
    strategy: Annotated[Strategy, _choice_option("strategy", Strategy)] = Strategy.DATA,
    tp: Annotated[int | None, _request_option("tp")] = None,
    pp: Annotated[int | None, _request_option("pp", "--pp", "--stages")] = None,
    dp: Annotated[int | None, _request_option("dp")] = None,
    ep: Annotated[int | None, _request_option("ep")] = None,
    dp_impl: Annotated[DataParallelImpl, _choice_option("dp_impl", DataParallelImpl)] = DataParallelImpl.DDP,
    micro_batch: Annotated[int | None, _request_option("micro_batch")] = None,
    micro_batches: Annotated[int | None, _request_option("micro_batches")] = None,
    sequence_parallel: Annotated[bool, _request_option("sequence_parallel", "--sequence-parallel")] = False,
    link_gbps: Annotated[float, _request_option("link_gbps")] = 100.0,
    latency_us: Annotated[float, _request_option("latency_us")] = 5.0,
    bucket_cap_mb: Annotated[float | None, _request_option("bucket_cap_mb")] = None,
    param_dtype: Annotated[str | None, _request_option("param_dtype")] = None,
    grad_dtype: Annotated[str | None, _request_option("grad_dtype")] = None,
    activation_dtype: Annotated[str | None, _request_option("activation_dtype")] = None,
    capacity_factor: Annotated[float | None, _request_option("capacity_factor")] = None,
    hot_expert_factor: Annotated[float, _request_option("hot_expert_factor")] = 1.0,
    megatron_core: Annotated[MegatronCore, _choice_option("megatron_core", MegatronCore)] = MegatronCore.CURRENT,
    grad_reduce_in_bf16: Annotated[bool, _request_option("grad_reduce_in_bf16", "--grad-reduce-in-bf16")] = False,
    find_unused_parameters: Annotated[
        bool, _request_option("find_unused_parameters", "--find-unused-parameters")
    ] = False,
    persistence_threshold: Annotated[int | None, _request_option("persistence_threshold")] = None,
    # On by default, so the CLI has only the flag that turns it off.
    no_vocab_parallel_loss: Annotated[
        bool,
        typer.Option(
            "--no-vocab-parallel-loss",
            help="Plan without the vocab-parallel cross-entropy's 3 small fp32 all-reduces.",
            rich_help_panel=PLAN_OPTIONS["vocab_parallel_loss"].group,
        ),
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the plan document as JSON.", rich_help_panel=OUTPUT_PANEL)
    ] = False,
    wide: Annotated[
        bool,
        typer.Option("--wide", help="Every column and line whole, however wide.", rich_help_panel=OUTPUT_PANEL),
    ] = False,
    export: Annotated[
        str | None,
        typer.Option(help=f"Print only the KCCB export: {', '.join(EXPORT_FORMATS)}.", rich_help_panel=OUTPUT_PANEL),
    ] = None,
    save: Annotated[
        bool, typer.Option("--save", help="Store the plan and print its id.", rich_help_panel=OUTPUT_PANEL)
    ] = False,
    name: Annotated[
        str | None,
        typer.Option(help="Stored plan's name. Default: model, strategy, mode.", rich_help_panel=OUTPUT_PANEL),
    ] = None,
    platform: Annotated[
        str | None,
        typer.Option(
            help="With --save: the platform it is planned for (emuplan platforms list); runs measured from it name it.",
            rich_help_panel=OUTPUT_PANEL,
        ),
    ] = None,
) -> None:
    """Plan a KCCB emulation: the collectives of one training step, the trial count and KCCB's settings."""
    # Planning itself (pydantic's models, model sources, strategies) is imported here: --help goes without.
    from emuplan.services.plans import plan_request
    from emuplan.workload.document import PlanDocument, PlanRequest
    from emuplan.workload.kccb import export_kccb
    from emuplan.workload.sources import FILE_SOURCES, PYTORCH_SUFFIX

    set_wide(wide)
    if list_presets:
        for preset in PRESETS.values():
            defaults = preset.defaults
            typer.echo(
                f"{preset.name:18} {preset.description}\n{'':18} defaults: dataset {defaults.dataset_size}, batch "
                f"{defaults.batch_size}, epochs {defaults.epochs}, {defaults.gpus} GPUs ({defaults.gpus_per_host} per "
                f"host), {defaults.dtype}" + (f", seq_len {defaults.seq_len}" if defaults.seq_len else "")
            )
        return
    if model is None:
        raise typer.BadParameter("give a preset name or a model file", param_hint="--model")
    if export is not None and export not in EXPORT_FORMATS:
        raise typer.BadParameter(f"use one of {', '.join(EXPORT_FORMATS)}", param_hint="--export")
    file_suffixes = (*FILE_SOURCES, PYTORCH_SUFFIX)
    server = remote_server() if save else None
    if server is not None and Path(model).suffix in file_suffixes:
        fail(
            f"--model {model}: with --server give a preset, or model:ID of a model uploaded to that server "
            "(POST /api/models); a local model file is not sent"
        )
    is_pytorch_source = Path(model).suffix == PYTORCH_SUFFIX
    try:
        sandbox = None
        if is_pytorch_source:  # the sandbox and reading the settings cost more than planning a preset
            from emuplan.sandbox.runner import SandboxPolicy
            from emuplan.settings import get_settings

            sandbox = SandboxPolicy.from_settings(get_settings())
        pytorch_options = None
        if model_class is not None and input_shape is not None:
            from emuplan.workload.pytorch_source import options_from_text

            pytorch_options = options_from_text(model_class, model_kwargs, input_shape, input_dtype, label_dtype)
        if Path(model).suffix in file_suffixes:
            model = str(Path(model).resolve())
        # Only the options that differ from the request's defaults: the stored request is what the user chose.
        given = {
            field: context.params[field]
            for field, option in PLAN_OPTIONS.items()
            if field in context.params and context.params[field] != option.default
        }
        if no_vocab_parallel_loss:
            given["vocab_parallel_loss"] = False
        request = PlanRequest(**{**given, "model": model})
        if server is None:
            document, _ = plan_request(request, sandbox=sandbox, allow_files=True, pytorch_options=pytorch_options)
    except ValueError as error:
        from pydantic import ValidationError

        if isinstance(error, ValidationError):  # a bound of PlanRequest's: name the field, as the planner does
            problem = error.errors(include_url=False)[0]
            error = ValueError(f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}")
        typer.echo(f"error: {in_cli_words(str(error))}", err=True)
        raise typer.Exit(2) from None
    plan_id = None
    if server is not None:
        # Planned and stored by the server: the same request as the local --save, the document it computed.
        body = {**request.model_dump(mode="json", exclude_unset=True), "name": name, "platform": platform}
        saved = server.post("/api/plans", body)
        plan_id, document = saved["id"], PlanDocument.model_validate(saved["workload"])
    elif save:
        from emuplan.store import plans as store

        database = open_database()
        try:
            with database.writing() as session:
                plan_id = store.save_document(session, document, request, name, platform=platform).id
        except ValueError as error:  # a platform no profile has
            fail(f"--{error}")
        finally:
            database.dispose()
    if export is not None:
        typer.echo(export_kccb(document, export), nl=False)
    elif json_output:
        payload = document.model_dump(mode="json")
        typer.echo(json.dumps({"id": plan_id, **payload} if save else payload, indent=2))
    else:
        typer.echo(render_plan(document))
    if save and not json_output:
        typer.echo(f"saved plan id {plan_id}", err=export is not None)
