"""PyTorch source uploads: a ``model.py`` with an ``nn.Module`` class, read only through the sandbox.

The sandbox's worker builds the model under FakeTensorMode (shapes, no memory) for the inventory and,
when asked, runs a few real training steps on one CPU process against torch's fake process group to
write down the exact collectives DDP, FSDP2 and DTensor tensor parallelism issue. Everything that
comes back is validated here before anyone uses it.
"""

from pydantic import BaseModel, Field

from emuplan.sandbox.runner import SandboxPolicy, run_in_sandbox
from emuplan.workload.inventory import DTYPE_BYTES, ModelInventory


class PytorchSourceError(ValueError):
    """The upload's options are unusable before anything runs (shape text, kwargs, dtypes)."""


class PytorchSourceOptions(BaseModel):
    model_class: str
    model_kwargs: dict = Field(default_factory=dict)
    input_shape: list[int]
    input_dtype: str = "float32"
    label_dtype: str = "int64"


class CaptureSettings(BaseModel):
    world_size: int = 4
    batch_size: int = 8192  # the tensor-parallel capture feeds one whole batch; DDP/FSDP2 need no real batch
    bucket_cap_mb: float | None = None  # None: PyTorch's default (first bucket 1 MiB, then 25 MiB)
    sequence_parallel: bool = False


class CapturedCollective(BaseModel):
    """One collective as PyTorch issued it. ``bytes`` is nccl-tests' size (the whole buffer)."""

    op: str  # all_reduce | all_gather | reduce_scatter | broadcast | all_to_all | send_recv
    phase: str  # forward | backward (when in the training step it was issued)
    bytes: int
    per_rank_bytes: int
    dtype: str
    torch_op: str


class CapturedStrategy(BaseModel):
    strategy: str  # ddp | fsdp2 | tensor
    world_size: int
    first_step: list[CapturedCollective]
    steady_step: list[CapturedCollective]
    settings: dict = Field(default_factory=dict)


class PytorchSourceResult(BaseModel):
    inventory: ModelInventory
    captures: list[CapturedStrategy] = Field(default_factory=list)


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
    answer = run_in_sandbox(request, policy)
    return PytorchSourceResult(inventory=answer["inventory"], captures=answer.get("captures") or [])
