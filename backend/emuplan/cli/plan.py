"""``emuplan plan``: plan a KCCB emulation from a preset or a model file (config.json, safetensors, ONNX,
PyTorch source run in the sandbox)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from emuplan.cli.app import app, open_database
from emuplan.sandbox.runner import SandboxPolicy
from emuplan.workload.document import DataParallelImpl, Mode, PlanDocument, PlanRequest, Strategy
from emuplan.workload.kccb import EXPORT_FORMATS, export_kccb
from emuplan.workload.planner import plan_workload
from emuplan.workload.presets import PRESETS
from emuplan.workload.pytorch_source import capture_for_plan, options_from_text
from emuplan.workload.sources import FILE_SOURCES, PYTORCH_SUFFIX, resolve_model

FILE_SUFFIXES = (*FILE_SOURCES, PYTORCH_SUFFIX)
_DEFAULT_FROM_MODEL = "Default: the model's (see `emuplan plan --list-presets`)."


def _table(headers: list[str], rows: list[list[str]], numeric: set[int]) -> str:
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(row) for row in rows)])


def render_plan(document: PlanDocument) -> str:
    """The readable form: summary, collectives table, then the KCCB settings to paste."""
    inputs = document.inputs
    lines = [
        f"{document.model.name}: {document.model.parameter_count:,} parameters, "
        f"{document.model.parameter_bytes:,} bytes ({inputs.param_dtype})",
        f"strategy {document.strategy.value}, mode {document.mode.value}; {inputs.gpus} GPUs on {inputs.hosts} hosts "
        f"× {inputs.gpus_per_host}; tp {inputs.tp} pp {inputs.pp} dp {inputs.dp}; "
        f"micro-batch {inputs.micro_batch} × {inputs.micro_batches}",
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
            f"{item.ideal_time_us:,.1f}",
        ]
        for item in document.collectives
    ]
    headers = ["collective", "op", "bytes_total", "bytes/rank", "count", "phase", "group", "ideal µs"]
    lines += [
        "",
        _table(headers, rows, numeric={2, 3, 4, 7}),
        "",
        f"KCCB ({document.kccb_trials} trial configuration(s)):",
    ]
    for trial in document.kccb_list():
        lines += [
            f"  algorithm    {trial.algorithm} ({trial.algorithm_id})",
            f"  data sizes   {trial.data_sizes}",
            f"  iterations   {trial.iterations}",
            f"  hosts        {trial.hosts} × {trial.gpus_per_host} GPUs per host",
            f"  note         {trial.note}",
            "",
        ]
    if document.captured:
        captured_rows = [
            [item.label, item.op.value, f"{item.bytes_total:,}", f"{item.bytes_per_rank:,}", item.phase.value]
            for item in document.captured
        ]
        lines += [
            "captured by PyTorch (fake process group; the truth where it differs):",
            _table(["collective", "op", "bytes_total", "bytes/rank", "phase"], captured_rows, numeric={2, 3}),
            "differences: " + ("; ".join(document.capture_differences) or "none"),
            "",
        ]
    lines += ["notes:", *(f"  - {note}" for note in document.notes)]
    return "\n".join(lines)


@app.command()
def plan(
    model: str = typer.Option(
        None,
        help=f"Preset ({', '.join(PRESETS)}) or a file: HuggingFace config.json, .safetensors, .onnx, or PyTorch "
        "source .py (run in the sandbox; needs --model-class and --input-shape).",
    ),
    model_class: str = typer.Option(None, help=".py: the nn.Module class to build."),
    model_kwargs: str = typer.Option(None, help=".py: constructor keyword arguments as JSON, e.g. '{\"width\": 64}'."),
    input_shape: str = typer.Option(None, help=".py: one sample's shape without the batch, e.g. 1,28,28."),
    input_dtype: str = typer.Option("float32", help=".py: the input's dtype."),
    label_dtype: str = typer.Option("int64", help=".py: the labels' dtype."),
    strategy: Annotated[Strategy, typer.Option(help="Parallelism to plan.")] = Strategy.DATA,
    mode: Annotated[
        Mode | None,
        typer.Option(
            help="tutorial (the seeds' rules) or framework. Default: tutorial for fashion-mnist-mlp, else framework."
        ),
    ] = None,
    dp_impl: Annotated[
        DataParallelImpl, typer.Option(help="Framework data-parallel implementation.")
    ] = DataParallelImpl.DDP,
    dataset_size: int = typer.Option(
        None, help=f"Training samples (sequences for transformers). {_DEFAULT_FROM_MODEL}"
    ),
    batch_size: int = typer.Option(None, help=f"Global batch size in samples. {_DEFAULT_FROM_MODEL}"),
    epochs: int = typer.Option(None, help=f"Epochs. {_DEFAULT_FROM_MODEL}"),
    drop_last: bool = typer.Option(False, help="Drop the last partial batch (trials floor instead of ceil)."),
    gpus: int = typer.Option(None, help="GPUs in total. Default: tp×pp×dp when --dp is given, else the model's."),
    hosts: int = typer.Option(None, help="Hosts. Default: gpus / gpus-per-host."),
    gpus_per_host: int = typer.Option(None, help="GPUs (one NIC each) per host. Default: 1 for the seed MLP, 8 else."),
    tp: int = typer.Option(None, help="Tensor-parallel degree. Default: all GPUs for --strategy tensor, else 1."),
    pp: int = typer.Option(None, help="Pipeline stages. Default: all GPUs for --strategy pipeline, else 1."),
    dp: int = typer.Option(None, help="Data-parallel degree. Default: gpus / (tp × pp)."),
    stages: int = typer.Option(None, help="Alias of --pp."),
    micro_batch: int = typer.Option(
        None, help="Samples per micro-batch. Default: 1 for transformers, else batch / (dp × micro-batches)."
    ),
    micro_batches: int = typer.Option(
        None,
        help="Micro-batches per step. Default: batch / (dp × micro-batch), or pp for models without transformer shape.",
    ),
    seq_len: int = typer.Option(None, help="Tokens per sequence (transformers). Default: min(max positions, 4096)."),
    sequence_parallel: bool = typer.Option(False, help="Megatron sequence parallel: all-gather/reduce-scatter."),
    vocab_parallel_loss: bool = typer.Option(True, help="Vocab-parallel cross-entropy (3 small fp32 all-reduces)."),
    bucket_cap_mb: float = typer.Option(
        None,
        help="DDP bucket_cap_mb. Default: PyTorch's, 25 MiB after a 1 MiB first bucket; "
        "when given, the first bucket closes at this size too (torch 2.13).",
    ),
    param_dtype: str = typer.Option(None, help="Parameter dtype. Default: float32 for the seed MLP, else bfloat16."),
    grad_dtype: str = typer.Option(None, help="Gradient dtype. Default: --param-dtype."),
    activation_dtype: str = typer.Option(None, help="Activation dtype. Default: --param-dtype."),
    link_gbps: float = typer.Option(100.0, help="Per-rank link speed for the α-β ideal time, Gbit/s."),
    latency_us: float = typer.Option(5.0, help="Per-hop latency α for the ideal time, µs."),
    json_output: bool = typer.Option(False, "--json", help="Print the plan document as JSON."),
    export: str = typer.Option(None, help=f"Print only the KCCB export: {', '.join(EXPORT_FORMATS)}."),
    save: bool = typer.Option(False, help="Store the plan in the database (EMUPLAN_DATABASE_URL) and print its id."),
    name: str = typer.Option(None, help="Name of the stored plan. Default: model, strategy and mode."),
    list_presets: bool = typer.Option(False, help="List the built-in models and exit."),
) -> None:
    """Plan a KCCB emulation: the collectives of one training step, the trial count and KCCB's settings."""
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
    if stages is not None and pp is not None and stages != pp:
        raise typer.BadParameter(f"--stages {stages} contradicts --pp {pp}", param_hint="--stages")
    if export is not None and export not in EXPORT_FORMATS:
        raise typer.BadParameter(f"use one of {', '.join(EXPORT_FORMATS)}", param_hint="--export")
    is_pytorch_source = Path(model).suffix == PYTORCH_SUFFIX
    try:
        sandbox = None
        if is_pytorch_source:  # reading the settings costs more than planning a preset
            from emuplan.settings import get_settings

            sandbox = SandboxPolicy.from_settings(get_settings())
        pytorch_options = (
            options_from_text(model_class, model_kwargs, input_shape, input_dtype, label_dtype)
            if model_class is not None and input_shape is not None
            else None
        )
        inventory = resolve_model(model, pytorch_options=pytorch_options, sandbox=sandbox)
        if Path(model).suffix in FILE_SUFFIXES:
            model = str(Path(model).resolve())
        request = PlanRequest(
            model=model,
            strategy=strategy,
            mode=mode,
            dp_impl=dp_impl,
            dataset_size=dataset_size,
            batch_size=batch_size,
            epochs=epochs,
            drop_last=drop_last,
            gpus=gpus,
            hosts=hosts,
            gpus_per_host=gpus_per_host,
            tp=tp,
            pp=pp if pp is not None else stages,
            dp=dp,
            micro_batch=micro_batch,
            micro_batches=micro_batches,
            seq_len=seq_len,
            sequence_parallel=sequence_parallel,
            vocab_parallel_loss=vocab_parallel_loss,
            bucket_cap_mb=bucket_cap_mb,
            param_dtype=param_dtype,
            grad_dtype=grad_dtype,
            activation_dtype=activation_dtype,
            link_gbps=link_gbps,
            latency_us=latency_us,
        )
        document = plan_workload(request, inventory)
        if is_pytorch_source:
            document = capture_for_plan(document, Path(model).read_text(), Path(model).name, pytorch_options, sandbox)
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    plan_id = None
    if save:
        from emuplan.store import plans as store

        database = open_database()
        try:
            with database.writing() as session:
                plan_id = store.save_document(session, document, request, name).id
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
