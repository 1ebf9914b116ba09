"""PyTorch source uploads: a ``model.py`` with an ``nn.Module`` class, read only through the sandbox.

The sandbox's worker builds the model under FakeTensorMode (shapes, no memory) for the inventory and,
when asked, runs a few real training steps on one CPU process against torch's fake process group to
write down the exact collectives DDP, FSDP2 and DTensor tensor parallelism issue. Everything that
comes back is validated here before anyone uses it.
"""

import json
from collections import Counter
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from emuplan import json_input
from emuplan.sandbox.runner import SandboxError, SandboxPolicy, run_in_sandbox
from emuplan.workload.collectives import CollectiveOp, ideal_time_s
from emuplan.workload.deferred_model import DeferredModel
from emuplan.workload.document import NormalisedInputs, ParallelDim, Phase, PlanDocument, PlannedCollective
from emuplan.workload.inventory import DTYPE_BYTES, Dimension, Dtype, ModelInventory, Name
from emuplan.workload.kccb import kccb_trials
from emuplan.workload.plan_options import Mode
from emuplan.workload.planner import framework_strides


def torch_version() -> str:
    return version("torch")


class PytorchSourceError(ValueError):
    """The upload's options are unusable before anything runs (shape text, kwargs, dtypes)."""


class PytorchSourceOptions(DeferredModel):
    model_class: str
    model_kwargs: dict = Field(default_factory=dict)
    input_shape: list[int]
    input_dtype: str = "float32"
    label_dtype: str = "int64"


class CaptureSettings(DeferredModel):
    world_size: int = 4
    batch_size: int = 8192  # the tensor-parallel capture feeds one whole batch; DDP/FSDP2 need no real batch
    bucket_cap_mb: float | None = None  # None: PyTorch's default (first bucket 1 MiB, then 25 MiB)
    sequence_parallel: bool = False
    find_unused_parameters: bool = False  # DDP's
    param_dtype: str = "float32"  # FSDP2's MixedPrecisionPolicy: the dtype parameters are all-gathered in
    reduce_dtype: str = "float32"  # and the one gradients are reduce-scattered in
    strategies: list[str] = Field(default_factory=lambda: ["ddp", "fsdp2", "tensor"])


# What the sandbox answers is written by a process that runs the uploaded code, which can write its own
# answer: every field is bounded (int64 sizes, name lengths, list lengths) and unknown fields refused.
MAX_CAPTURED_COLLECTIVES = 100_000
MAX_WORLD_SIZE = 1 << 20


class CapturedCollective(DeferredModel):
    """One collective as PyTorch issued it. ``bytes`` is nccl-tests' size (the whole buffer)."""

    model_config = ConfigDict(extra="forbid")

    op: CollectiveOp
    phase: Literal["forward", "backward"]  # when in the training step it was issued
    bytes: Dimension
    per_rank_bytes: Dimension
    dtype: Dtype
    torch_op: Name

    @model_validator(mode="after")
    def _piece_within_the_whole(self) -> "CapturedCollective":
        if self.per_rank_bytes > self.bytes:
            raise ValueError(f"per_rank_bytes {self.per_rank_bytes} is more than the whole buffer's {self.bytes}")
        return self


class CapturedStrategy(DeferredModel):
    model_config = ConfigDict(extra="forbid")

    strategy: Literal["ddp", "fsdp2", "tensor"]
    world_size: Annotated[int, Field(ge=1, le=MAX_WORLD_SIZE)]
    first_step: list[CapturedCollective] = Field(max_length=MAX_CAPTURED_COLLECTIVES)
    steady_step: list[CapturedCollective] = Field(max_length=MAX_CAPTURED_COLLECTIVES)
    settings: dict = Field(default_factory=dict)


class PytorchSourceResult(DeferredModel):
    """A successful sandbox answer, as validated: the worker's ``ok`` and ``peak_rss_bytes`` included."""

    model_config = ConfigDict(extra="forbid")

    ok: Literal[True] = True
    inventory: ModelInventory
    captures: list[CapturedStrategy] = Field(default_factory=list, max_length=3)
    peak_rss_bytes: Dimension | None = None


def _first_problem(error: ValidationError) -> str:
    problem = error.errors(include_url=False)[0]
    return f"{'.'.join(map(str, problem['loc'])) or 'answer'}: {problem['msg']}"


def validated_answer(answer: dict, name: str, capture: "CaptureSettings | None") -> PytorchSourceResult:
    """The sandbox's answer as a ``PytorchSourceResult``, or SandboxError("bad_answer") saying what is wrong."""
    try:
        result = PytorchSourceResult.model_validate(answer)
    except ValidationError as error:
        raise SandboxError("bad_answer", f"the sandbox's answer is not valid: {_first_problem(error)}") from None
    # The worker reads parameters and activations; a transformer's numbers come only from a config.json.
    if result.inventory.transformer is not None:
        raise SandboxError(
            "bad_answer", "the sandbox's answer holds a transformer shape, which the sandbox never reports"
        )
    if (result.inventory.name, result.inventory.source_kind) != (name, "pytorch"):
        raise SandboxError("bad_answer", "the sandbox's answer describes another model than the one asked for")
    expected = [(strategy, capture.world_size) for strategy in capture.strategies] if capture else []
    if [(captured.strategy, captured.world_size) for captured in result.captures] != expected:
        raise SandboxError("bad_answer", "the sandbox's answer does not hold the captures that were asked for")
    return result


def parse_input_shape(text: str) -> list[int]:
    """'1,28,28' or '[1, 28, 28]' → [1, 28, 28]: one sample's shape, without the batch dimension."""
    cleaned = text.strip().strip("[]()")
    try:
        shape = [int(part) for part in cleaned.split(",") if part.strip()]
    except ValueError:
        raise PytorchSourceError(
            f"input shape {text!r} is not a comma-separated list of integers, e.g. 1,28,28"
        ) from None
    if not shape or any(size <= 0 for size in shape):
        raise PytorchSourceError(f"input shape {text!r} must list at least one positive size, e.g. 1,28,28")
    return shape


def check_options(options: PytorchSourceOptions) -> None:
    for field in ("input_dtype", "label_dtype"):
        value = getattr(options, field)
        if value not in DTYPE_BYTES:
            raise PytorchSourceError(f"{field} {value!r} is not one of {', '.join(DTYPE_BYTES)}")
    if not options.model_class.isidentifier():
        raise PytorchSourceError(f"model class {options.model_class!r} is not a Python class name")


def options_from_text(
    model_class: str,
    model_kwargs: str | None,
    input_shape: str,
    input_dtype: str = "float32",
    label_dtype: str = "int64",
) -> PytorchSourceOptions:
    """The options as a form or the command line gives them: kwargs as JSON text, the shape as '1,28,28'."""
    try:
        kwargs = json_input.loads(model_kwargs) if model_kwargs else {}
    except json.JSONDecodeError as error:
        raise PytorchSourceError(f"model_kwargs: not valid JSON ({error})") from None
    if not isinstance(kwargs, dict):
        raise PytorchSourceError("model_kwargs: expected a JSON object of constructor arguments")
    options = PytorchSourceOptions(
        model_class=model_class,
        model_kwargs=kwargs,
        input_shape=parse_input_shape(input_shape),
        input_dtype=input_dtype,
        label_dtype=label_dtype,
    )
    check_options(options)
    return options


def inspect_pytorch_source(
    source: str,
    file_name: str,
    options: PytorchSourceOptions,
    policy: SandboxPolicy,
    capture: CaptureSettings | None = None,
    name: str | None = None,
) -> PytorchSourceResult:
    """The model's inventory (and, with ``capture``, its captured collectives), computed in the sandbox."""
    check_options(options)
    request = {
        "source": source,
        "file_name": file_name,
        "name": name or options.model_class,
        **options.model_dump(),
        "capture": capture.model_dump() if capture else None,
    }
    return validated_answer(run_in_sandbox(request, policy), request["name"], capture)


def read_pytorch_file(path: Path, options: PytorchSourceOptions | None, policy: SandboxPolicy) -> ModelInventory:
    """``emuplan plan --model model.py --model-class ... --input-shape ...``."""
    if options is None:
        raise PytorchSourceError(f"{path.name}: a PyTorch source needs --model-class and --input-shape")
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PytorchSourceError(f"{path}: no such file") from None
    return inspect_pytorch_source(source, path.name, options, policy).inventory


# --- captured collectives next to the planner's analytic ones ---------------------------------------


def _capture_target(inputs: NormalisedInputs) -> tuple[str, ParallelDim, int] | None:
    """Which capture answers this plan: (strategy, dimension, group size), or None when none does."""
    if inputs.pp == 1 and inputs.tp == 1 and inputs.dp > 1 and inputs.dp_impl.value in ("ddp", "fsdp2"):
        return inputs.dp_impl.value, ParallelDim.DP, inputs.dp
    if inputs.pp == 1 and inputs.dp == 1 and inputs.tp > 1:
        return "tensor", ParallelDim.TP, inputs.tp
    return None


def captured_collectives(
    captured: CapturedStrategy, dimension: ParallelDim, inputs: NormalisedInputs
) -> list[PlannedCollective]:
    """The steady-state step as the plan document lists collectives, one entry per issue of one micro-batch's
    forward and backward: DDP's once per step (no_sync before all but the last micro-batch), FSDP2's and tensor
    parallelism's in every micro-batch (``data_parallel.micro_batch_note``)."""
    count = 1 if captured.strategy == "ddp" else inputs.micro_batches
    items = []
    for index, collective in enumerate(captured.steady_step):
        op = collective.op
        items.append(
            PlannedCollective(
                op=op,
                bytes_total=collective.bytes,
                bytes_per_rank=collective.per_rank_bytes,
                dtype=collective.dtype,
                group_size=captured.world_size,
                count_per_step=count,
                phase=Phase(collective.phase),
                parallel_dim=dimension,
                label=f"captured {captured.strategy} #{index} ({collective.torch_op})",
                ideal_time_us=ideal_time_s(
                    op, collective.bytes, captured.world_size, inputs.link_gbps, inputs.latency_us
                )
                * 1e6,
            )
        )
    return items


def capture_differences(analytic: list[PlannedCollective], captured: list[PlannedCollective]) -> list[str]:
    """What the analytic plan gets wrong, with the captured list as the truth ([] when they agree)."""

    def keyed(items: list[PlannedCollective]) -> list[tuple[str, str, int]]:
        return [(i.op.value, i.phase.value, i.bytes_total) for i in items for _ in range(i.count_per_step)]

    analytic_keys, captured_keys = keyed(analytic), keyed(captured)
    missing, extra = Counter(captured_keys) - Counter(analytic_keys), Counter(analytic_keys) - Counter(captured_keys)
    differences = [
        f"PyTorch issues {count} × {op} of {size} bytes ({phase}) that the analytic plan does not list"
        for (op, phase, size), count in missing.items()
    ]
    differences += [
        f"the analytic plan lists {count} × {op} of {size} bytes ({phase}) that PyTorch does not issue"
        for (op, phase, size), count in extra.items()
    ]
    if not differences and analytic_keys != captured_keys:
        differences.append(f"the same collectives, but PyTorch issues them in a different order: {captured_keys}")
    return differences


@lru_cache(maxsize=64)
def _captured_once(
    source: str, file_name: str, options_json: str, settings_json: str, policy: SandboxPolicy
) -> PytorchSourceResult:
    """A capture depends only on the source and its settings: the dashboard's live preview asks for the
    same one on every keystroke that leaves group size and batch alone. Failures are not cached."""
    options = PytorchSourceOptions.model_validate_json(options_json)
    settings = CaptureSettings.model_validate_json(settings_json)
    return inspect_pytorch_source(source, file_name, options, policy, capture=settings)


def capture_for_plan(
    document: PlanDocument, source: str, file_name: str, options: PytorchSourceOptions, policy: SandboxPolicy
) -> PlanDocument:
    """The plan with ``captured`` (PyTorch's own collectives, fake process group) and ``capture_differences``.

    Framework mode only, and only for what one CPU process can capture: DDP or FSDP2 data parallelism,
    or DTensor tensor parallelism, each on its own. DDP's analytic buckets follow the sandboxed run's
    gradient order and stay beside the capture (a sandbox failure leaves them standing, with a note).
    FSDP2 units and a DTensor layout depend on how the user's code wraps and runs its modules, which
    the analytic path cannot know: for those the capture is the plan, and without one there is none.
    """
    if document.mode is not Mode.FRAMEWORK:
        return document
    inputs = document.inputs
    target = _capture_target(inputs)
    capture_only = inputs.tp > 1 or (inputs.dp > 1 and inputs.dp_impl.value == "fsdp2")
    if target is None:
        if capture_only:
            raise PytorchSourceError(
                f"{file_name}: FSDP2 and DTensor tensor parallelism of a PyTorch source are planned from what "
                "PyTorch itself issues, captured one dimension at a time: plan FSDP2 data parallelism or tensor "
                "parallelism on its own (pp 1), or DDP with pipeline stages"
            )
        note = "Exact capture covers DDP or FSDP2 data parallelism and DTensor tensor parallelism on their own; "
        return document.model_copy(update={"notes": [*document.notes, note + "this plan was not captured."]})
    strategy, dimension, group_size = target
    settings = CaptureSettings(
        world_size=group_size,
        batch_size=inputs.micro_batch,
        bucket_cap_mb=inputs.bucket_cap_mb,
        sequence_parallel=inputs.sequence_parallel,
        find_unused_parameters=inputs.find_unused_parameters,
        param_dtype=inputs.param_dtype,
        reduce_dtype=inputs.grad_dtype,
        strategies=[strategy],
    )
    try:
        result = _captured_once(source, file_name, options.model_dump_json(), settings.model_dump_json(), policy)
    except SandboxError as error:
        if capture_only:
            raise PytorchSourceError(
                f"{file_name}: capturing {strategy} failed, so it cannot be planned: {error.message}"
            ) from None
        note = f"Exact capture failed, only the analytic collectives are shown: {error.message}"
        return document.model_copy(update={"notes": [*document.notes, note]})
    captured = captured_collectives(result.captures[0], dimension, inputs)
    analytic = [item for item in document.collectives if item.parallel_dim is dimension]
    differences = capture_differences(analytic, captured)
    if capture_only:
        document = document.model_copy(
            update={
                "collectives": [item for item in document.collectives if item.parallel_dim is not dimension] + captured,
                "notes": [
                    *document.notes,
                    f"{strategy}: for a PyTorch source the collectives are the capture itself; no analytic list "
                    "is computed, since FSDP2 units and the tensor-parallel layout follow the model's own code.",
                ],
            }
        )
        differences = []
    # A capture covers the plan's only parallel dimension, so the whole export comes from it.
    kccb = kccb_trials(captured, document.trials, framework_strides(inputs), inputs.gpus_per_host)
    note = (
        f"captured: the {strategy} collectives PyTorch {torch_version()} itself issued for one steady-state step "
        f"on {group_size} ranks (fake process group)"
        + (
            f", one micro-batch of {inputs.micro_batches} (count_per_step counts the step)"
            if inputs.micro_batches > 1
            else ""
        )
        + ". The KCCB export and a measurement of this plan use this "
        "captured list; `collectives` keeps the analytic list beside it"
        + (f" ({len(differences)} differences in capture_differences)." if differences else ", which agrees.")
    )
    return document.model_copy(
        update={
            "captured": captured,
            "capture_differences": differences,
            "kccb": kccb[0] if len(kccb) == 1 else kccb,
            "kccb_trials": len(kccb),
            "kccb_source": "captured",
            "notes": [*document.notes, note],
        }
    )
