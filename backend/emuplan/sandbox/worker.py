"""Runs INSIDE the sandbox: loads an uploaded model source and reports its shapes and collectives as JSON.

This file is executed by path (``python -I worker.py``) in a bubblewrap sandbox that holds only the
system, the Python installation and the virtual environment, so it imports nothing from emuplan:
only the standard library and torch. It reads one JSON request on stdin and writes one JSON document
on stdout; the server validates that document before it trusts any of it.

Request: {"source", "file_name", "model_class", "model_kwargs", "input_shape", "input_dtype",
"label_dtype", "capture": null | {"world_size", "batch_size", "bucket_cap_mb", "sequence_parallel"}}.
Answer: {"ok": true, "inventory": {...}, "captures": [...]} or
{"ok": false, "error": {"kind", "message", "line"?}}, each with the worker's "peak_rss_bytes".
"""

import contextlib
import errno
import gc
import json
import os
import resource
import sys
import traceback
import types
import typing

# Shapes are read from a small batch: two samples keep BatchNorm and friends in their training path.
SHAPE_BATCH = 2
USER_MODULE_NAME = "uploaded_model"


# What a system call the seccomp filter refuses (EPERM, no file name) gets added to its error.
REFUSED_BY_THE_SANDBOX = (
    "refused by the sandbox, which allows threads but no new processes, no namespaces, and no memory outside "
    "the model's address-space limit: no memfd, SysV shared memory, sockets or larger pipe buffers"
)


class ModelError(Exception):
    def __init__(self, kind: str, message: str, line: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line


def _claim_stdout():
    """Keep the real stdout for the answer and send everything the user's code prints to stderr."""
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return answer


def _exception_text(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "MemoryError: the model asked for more memory than the sandbox allows"
    if isinstance(exc, PermissionError) and exc.errno == errno.EPERM and exc.filename is None:
        return f"{type(exc).__name__}: {exc} ({REFUSED_BY_THE_SANDBOX})"
    if isinstance(exc, BlockingIOError) and exc.errno == errno.EAGAIN:
        return f"{type(exc).__name__}: {exc} (the sandbox's process limit was reached)"
    return f"{type(exc).__name__}: {exc}"


def _user_line(exc: BaseException, file_name: str) -> int | None:
    """The line of the uploaded file closest to where ``exc`` was raised."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == file_name:
            line = frame.lineno
    return line


def load_model_class(source: str, file_name: str, class_name: str):
    import torch.nn as nn

    try:
        code = compile(source, file_name, "exec")
    except SyntaxError as exc:
        raise ModelError("syntax_error", f"{file_name}, line {exc.lineno}: {exc.msg}", exc.lineno) from None
    module = types.ModuleType(USER_MODULE_NAME)
    module.__file__ = file_name
    sys.modules[USER_MODULE_NAME] = module
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        line = _user_line(exc, file_name)
        where = f"{file_name}, line {line}" if line else file_name
        raise ModelError("import_failed", f"{where}: running the module failed: {_exception_text(exc)}", line) from None
    candidate = module.__dict__.get(class_name)
    if candidate is None:
        modules = sorted(
            name
            for name, value in module.__dict__.items()
            if isinstance(value, type) and issubclass(value, nn.Module) and value.__module__ == USER_MODULE_NAME
        )
        found = ", ".join(modules) if modules else "none"
        raise ModelError("class_not_found", f"{file_name} defines no class {class_name!r} (nn.Module classes: {found})")
    if not (isinstance(candidate, type) and issubclass(candidate, nn.Module)):
        raise ModelError("not_a_module", f"{class_name!r} in {file_name} is not a torch.nn.Module subclass")
    return candidate


def construct(model_class, kwargs: dict, file_name: str):
    try:
        return model_class(**kwargs)
    except Exception as exc:
        line = _user_line(exc, file_name)
        where = f" ({file_name}, line {line})" if line else ""
        raise ModelError(
            "constructor_failed", f"{model_class.__name__}(**{kwargs!r}) failed{where}: {_exception_text(exc)}", line
        ) from None


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _torch_dtype(name: str):
    import torch

    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ModelError("bad_dtype", f"unknown dtype {name!r}")
    return value


def make_input(batch: int, shape: list[int], dtype_name: str):
    import torch

    dtype = _torch_dtype(dtype_name)
    if dtype.is_floating_point:
        return torch.randn(batch, *shape, dtype=dtype)
    return torch.zeros(batch, *shape, dtype=dtype)


def training_loss(output):
    """A scalar that depends on every floating-point output, so backward reaches every parameter."""
    import torch
    from torch.utils._pytree import tree_leaves

    parts = [t.float().sum() for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if not parts:
        raise ModelError("forward_failed", "forward() returned no floating-point tensor to run backward from")
    return torch.stack(parts).sum()


# Raised by FakeTensorMode when an op's output shape (nonzero, a boolean mask index, unique) or a
# Python branch depends on tensor values that shape inference cannot know.
DATA_DEPENDENT_ERRORS = (
    "DynamicOutputShapeException",
    "DataDependentOutputException",
    "GuardOnDataDependentSymNode",
    "PendingUnbackedSymbolNotFound",
)


def run_step(model, sample, file_name: str, shape_text: str):
    """One forward and backward; a failure is reported with the sample shape that was fed in, or as
    data-dependent when shape inference could not follow values."""
    try:
        output = model(sample)
    except ModelError:
        raise
    except Exception as exc:
        line = _user_line(exc, file_name)
        where = f" ({file_name}, line {line})" if line else ""
        if type(exc).__name__ in DATA_DEPENDENT_ERRORS:
            raise ModelError(
                "data_dependent",
                f"forward(){where} computes a shape or takes a branch from tensor values, which shape inference "
                f"without data (FakeTensorMode) cannot follow: {_exception_text(exc)}",
                line,
            ) from None
        raise ModelError(
            "input_shape_mismatch",
            f"forward() failed for an input of shape {shape_text}{where}: {_exception_text(exc)}",
            line,
        ) from None
    loss = training_loss(output)
    try:
        loss.backward()
    except Exception as exc:
        raise ModelError("backward_failed", f"backward() failed: {_exception_text(exc)}") from None
    return output


# A model whose parameters fit in this is read on real CPU tensors (two samples through forward and
# backward cost little): FakeTensorMode's first use imports torch._dynamo, which takes about as long as
# importing torch itself, and the meta device's Python kernels import it too.
REAL_TENSOR_PARAMETER_BYTES = 64 * 1024 * 1024


def describe_model(request: dict) -> dict:
    """Parameters in registration order and leaf-module activations per sample.

    A small model runs on real CPU tensors, watched for operations whose output shape or a Python
    branch depends on tensor values; a larger one, or one that does such a thing, under FakeTensorMode
    (shapes, no memory), whose error is the one reported when both fail.
    """
    import torch

    model_class = load_model_class(request["source"], request["file_name"], request["model_class"])
    try:
        with torch.device("meta"):  # the parameters' sizes, without their memory
            probe = construct(model_class, request.get("model_kwargs") or {}, request["file_name"])
        small = sum(p.numel() * p.element_size() for p in probe.parameters()) <= REAL_TENSOR_PARAMETER_BYTES
    except ModelError:
        small = False
    if small:
        try:
            return _describe(model_class, request, contextlib.nullcontext(), _refuse_data_dependent_operations())
        except ModelError:
            pass
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    # A shape environment lets data-dependent sizes (a mask's selected rows, as in mask-routed
    # mixture-of-experts) stay symbolic instead of failing.
    return _describe(model_class, request, FakeTensorMode(shape_env=ShapeEnv()), contextlib.nullcontext())


def _refuse_data_dependent_operations():
    """A dispatch mode that raises on the operations FakeTensorMode cannot run without a shape
    environment (their tags say so): on real tensors they would give shapes of this random sample."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    data_dependent = (torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output)

    class RefuseDataDependent(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # nothing here is compiled; the default wrapper would import torch._dynamo

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            if any(tag in func.tags for tag in data_dependent):
                raise RuntimeError(f"{func} depends on tensor values")
            return func(*args, **(kwargs or {}))

    return RefuseDataDependent()


def _describe(model_class, request: dict, tensors, step) -> dict:
    """The inventory, with the model built and run inside ``tensors`` (FakeTensorMode, or real tensors)
    and its training step inside ``step``."""
    import torch

    file_name = request["file_name"]
    input_shape = list(request["input_shape"])
    activations = []

    def record(name: str):
        def hook(module, _inputs, output):
            if isinstance(output, torch.Tensor):
                shape = list(output.shape)
                if not all(isinstance(size, int) for size in shape):
                    return  # a data-dependent size (e.g. the tokens an expert receives) has no per-sample shape
                if shape and shape[0] == SHAPE_BATCH:
                    shape = shape[1:]
                activations.append(
                    {
                        "module": name,
                        "module_type": type(module).__name__,
                        "shape": shape,
                        "dtype": _dtype_name(output.dtype),
                    }
                )

        return hook

    with tensors:
        model = construct(model_class, request.get("model_kwargs") or {}, file_name)
        parameters = [
            {"name": name, "shape": list(p.shape), "dtype": _dtype_name(p.dtype), "requires_grad": p.requires_grad}
            for name, p in model.named_parameters()
        ]
        buffers = [
            {"name": name, "shape": list(b.shape), "dtype": _dtype_name(b.dtype)} for name, b in model.named_buffers()
        ]
        for name, module in model.named_modules():
            if name and not any(True for _ in module.children()):
                module.register_forward_hook(record(name))
        # The order backward completes gradients is the order DDP rebuilds its buckets in.
        gradient_order = []
        for name, p in model.named_parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(lambda _p, name=name: gradient_order.append(name))
        sample = make_input(SHAPE_BATCH, input_shape, request.get("input_dtype", "float32"))
        with step:
            run_step(
                model,
                sample,
                file_name,
                f"[{SHAPE_BATCH}, {', '.join(map(str, input_shape))}] (batch of {SHAPE_BATCH})",
            )
    return {
        "name": request.get("name") or model_class.__name__,
        "source_kind": "pytorch",
        "parameters": parameters,
        "gradient_order": gradient_order,
        "buffers": buffers,
        "activations": activations,
        "sample": {
            "shape": input_shape,
            "dtype": request.get("input_dtype", "float32"),
            "label_shape": [],
            "label_dtype": request.get("label_dtype", "int64"),
        },
    }


# --- exact collective capture with torch's fake process group -------------------------------------


def _collective_kind(op_name: str) -> str | None:
    folded = op_name.split(".")[0].strip("_").replace("_", "")
    for prefix, kind in (
        ("allreduce", "all_reduce"),
        ("allgather", "all_gather"),
        ("reducescatter", "reduce_scatter"),
        ("alltoall", "all_to_all"),
        ("broadcast", "broadcast"),
        ("send", "send_recv"),
        ("recv", "send_recv"),
    ):
        if folded.startswith(prefix):
            return kind
    return None


class CollectiveLogger:
    """A TorchDispatchMode that writes down every c10d / functional-collective op and its buffer size.

    Byte counts follow nccl-tests: the whole buffer (for all-gather the gathered output, for
    reduce-scatter the unscattered input), and the per-rank piece next to it.
    """

    def __init__(self, world_size: int):
        from torch.utils._python_dispatch import TorchDispatchMode

        logger = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func.namespace in ("c10d", "_c10d_functional"):
                    logger._note(func.__name__, args)
                return func(*args, **kwargs)

        self.mode = _Mode()
        self.world_size = world_size
        self.phase = "forward"
        self.records: list[dict] = []

    def _note(self, op_name: str, args) -> None:
        import torch
        from torch.utils._pytree import tree_leaves

        kind = _collective_kind(op_name)
        if kind is None:
            return
        tensors = [t for t in tree_leaves(args) if isinstance(t, torch.Tensor)]
        if not tensors:
            return
        sizes = [t.numel() * t.element_size() for t in tensors]
        if kind in ("all_gather", "reduce_scatter") and len(tensors) >= 2:
            whole = max(sizes)  # c10d's in-place ops take the output and the input
        elif kind == "all_gather":
            whole = sizes[0] * self.world_size  # functional all_gather_into_tensor takes only the input piece
        elif kind == "all_reduce" and op_name.startswith("allreduce_"):
            whole = sum(sizes)  # c10d.allreduce_ takes the list of tensors reduced together
        else:
            whole = sizes[0]
        piece = whole // self.world_size if kind in ("all_gather", "reduce_scatter") else whole
        self.records.append(
            {
                "op": kind,
                "phase": self.phase,
                "bytes": whole,
                "per_rank_bytes": piece,
                "dtype": _dtype_name(tensors[0].dtype),
                "torch_op": op_name,
            }
        )


def _captured_steps(model, sample, logger: CollectiveLogger, steps: int, before_step=None) -> list[list[dict]]:
    """Runs ``steps`` training steps and returns the collectives of each, in issue order; ``before_step``
    (unlogged) runs before each."""
    per_step = []
    for _ in range(steps):
        if before_step is not None:
            before_step()
        logger.records = []
        logger.phase = "forward"
        with logger.mode:
            output = model(sample)
            logger.phase = "backward"
            training_loss(output).backward()
        per_step.append(logger.records)
        for parameter in model.parameters():
            parameter.grad = None
    return per_step


CAPTURE_HINTS = {
    "tensor": " (the generic plan shards every Linear, alternating ColwiseParallel and RowwiseParallel; forward "
    "code that assumes whole layers, such as splitting attention heads by the full hidden size, cannot run sharded)"
}


def _captured(
    strategy: str,
    model,
    request: dict,
    world_size: int,
    batch: int,
    settings: dict,
    shape: list[int] | None = None,
    logger: CollectiveLogger | None = None,
    steps: int = 3,
    before_step=None,
) -> dict:
    """Runs the wrapped model for ``steps`` steps on ``batch`` samples (of ``shape``, by default the request's
    input shape) and reports what it sent in the first and the last."""
    shape = list(shape or request["input_shape"])
    sample = make_input(batch, shape, request.get("input_dtype", "float32"))
    try:
        per_step = _captured_steps(model, sample, logger or CollectiveLogger(world_size), steps, before_step)
    except ModelError:
        raise
    except Exception as exc:
        hint = CAPTURE_HINTS.get(strategy, "")
        raise ModelError(
            "capture_failed", f"capturing {strategy} collectives failed{hint}: {_exception_text(exc)}"
        ) from None
    return {
        "strategy": strategy,
        "world_size": world_size,
        "first_step": per_step[0],
        "steady_step": per_step[-1],
        "settings": {**settings, "batch_size": batch, "sample_shape": shape},
    }


# DDP rebuilds its buckets once, before the second step's forward, in the order the first backward made
# the gradients ready (Reducer::rebuild_buckets, called from DistributedDataParallel._pre_forward). The
# capture calls that rebuild itself before each step, outside the log, so the second step is already the
# steady state, without the rebuild's one-off broadcast of the new bucket indices.
DDP_STEPS = 2


def capture_ddp(model_class, request: dict, world_size: int, _mesh, cap: dict, inventory: dict) -> dict:
    """DDP's collectives, on a one-token sample when that provably changes nothing, else on the full one.

    DDP's buckets depend on the parameters' sizes and the order their gradients become ready, and not on
    the sample's values or length, but the capture computes for real (GPT-2 with 1024 tokens: about 0.9
    TFLOP a step). So it first runs a sample whose first (sequence) dimension is 1, and keeps that capture
    when the first backward made the gradients ready in the inventory's full-length order and the model's
    own code issued no collective; otherwise it runs the full sample.
    """
    shape = list(request["input_shape"])
    if shape and shape[0] > 1:
        short = _ddp_capture(model_class, request, world_size, cap, [1, *shape[1:]], trial=True)
        if short is not None and short.gradient_order == inventory["gradient_order"] and not short.model_collectives:
            return short.captured
        gc.collect()  # the short run's model and buckets (reference cycles through DDP's hooks) before the next
    return _ddp_capture(model_class, request, world_size, cap, shape, trial=False).captured


def _zero_filled_random_initialisation():
    """A dispatch mode under which the random fills of parameter initialisation (``uniform_`` and
    ``normal_``, under nn.init's kaiming, xavier and trunc_normal too) fill zeros instead: GPT-2's
    random initial values cost 3.5 s of the one-token capture, and its check does not depend on them."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    random_fills = (torch.ops.aten.uniform_.default, torch.ops.aten.normal_.default)

    class ZeroFill(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # nothing here is compiled; the default wrapper would import torch._dynamo

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            if func in random_fills:
                return args[0].zero_()
            return func(*args, **(kwargs or {}))

    return ZeroFill()


class DdpCapture(typing.NamedTuple):
    captured: dict
    gradient_order: list[str]  # parameter names in the order the first backward made their gradients ready
    model_collectives: int  # collectives the model's own code issued (not DDP's broadcasts or bucket all-reduces)


def _ddp_capture(model_class, request: dict, world_size: int, cap: dict, shape: list[int], trial: bool):
    """DDP's capture on a sample of ``shape``. A ``trial`` (the one-token run, checked afterwards) builds
    the model with zeros for its random initial values and gives None where a failure would raise."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    try:
        with _zero_filled_random_initialisation() if trial else contextlib.nullcontext():
            model = construct(model_class, request.get("model_kwargs") or {}, request["file_name"])
    except ModelError:
        if trial:
            return None
        raise
    # torch 2.13 keeps the 1 MiB first bucket only when bucket_cap_mb is left at its default (None);
    # an explicit cap applies to the first bucket too.
    bucket_cap_mb = cap.get("bucket_cap_mb")
    # find_unused_parameters: DDP then never rebuilds its buckets, and after them all-reduces its map of the
    # parameters each rank used.
    find_unused = bool(cap.get("find_unused_parameters", False))
    # Gradients as views into the buckets: the same buckets and all-reduces, one copy of the gradients less.
    # No initial sync: its broadcasts (every parameter, 1.4 s of copies for GPT-2) come before the logged
    # steps, and the fake process group's ranks hold nothing to synchronise.
    ddp = DistributedDataParallel(
        model,
        bucket_cap_mb=bucket_cap_mb,
        gradient_as_bucket_view=True,
        init_sync=False,
        find_unused_parameters=find_unused,
    )
    logger = CollectiveLogger(world_size)
    counts = {"steps": 0, "in_forward": 0, "by_ddp_in_backward": 0, "model_forward_start": 0}
    gradient_order = []

    def record_bucket(_state, bucket):
        # torch's fake process group completes its work with no value, which DDP's default hook
        # cannot unpack; issue the same all-reduce and hand DDP its (unchanged) bucket back.
        buffer = bucket.buffer()
        dist.all_reduce(buffer)
        counts["by_ddp_in_backward"] += 1
        future = torch.futures.Future()
        future.set_result(buffer)
        return future

    def model_forward_starts(_module, _inputs):
        counts["model_forward_start"] = len(logger.records)

    def model_forward_ends(_module, _inputs, _output):
        counts["in_forward"] += len(logger.records) - counts["model_forward_start"]

    def before_step():
        counts["steps"] += 1
        ddp.reducer._rebuild_buckets()

    def gradient_ready(name: str):
        def hook(_parameter):
            if counts["steps"] == 1:  # the order the rebuild follows
                gradient_order.append(name)

        return hook

    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            parameter.register_post_accumulate_grad_hook(gradient_ready(name))
    model.register_forward_pre_hook(model_forward_starts)
    model.register_forward_hook(model_forward_ends)
    ddp.register_comm_hook(None, record_bucket)
    settings = {
        "bucket_cap_mb": bucket_cap_mb,
        "find_unused_parameters": find_unused,
        "first_bucket_bytes": ddp._bucket_config.first_bucket_bytes_cap,
        "bucket_bytes": ddp.bucket_bytes_cap,
    }
    batch = _smallest_training_batch(model)
    try:
        captured = _captured("ddp", ddp, request, world_size, batch, settings, shape, logger, DDP_STEPS, before_step)
    except ModelError:
        if trial:
            return None
        raise
    both_steps = captured["first_step"] + captured["steady_step"]
    in_backward = sum(record["phase"] == "backward" for record in both_steps)
    by_ddp = counts["by_ddp_in_backward"] + (DDP_STEPS if find_unused else 0)  # one used-parameter map a step
    return DdpCapture(captured, gradient_order, counts["in_forward"] + in_backward - by_ddp)


def _smallest_training_batch(model) -> int:
    """DDP's buckets do not depend on the batch, but its capture computes for real: one sample, unless
    BatchNorm needs two per channel to run in training mode."""
    import torch.nn as nn

    has_batch_norm = any(isinstance(module, nn.modules.batchnorm._BatchNorm) for module in model.modules())
    return SHAPE_BATCH if has_batch_norm else 1


def _fake_tensors():
    """FSDP2 and DTensor run on fake tensors: their collectives need shapes, not data, so a large
    model is captured without its weights' memory or its compute. (DDP's C++ reducer needs real
    storage for its buckets, so DDP runs on real tensors.)"""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv())


def capture_fsdp2(model_class, request: dict, world_size: int, mesh, cap: dict, _inventory: dict) -> dict:
    import torch.nn as nn
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    # The plan's dtypes as FSDP2's mixed precision: parameters all-gathered in param_dtype, gradients
    # reduce-scattered in reduce_dtype.
    dtypes = {"param_dtype": cap.get("param_dtype", "float32"), "reduce_dtype": cap.get("reduce_dtype", "float32")}
    policy = MixedPrecisionPolicy(**{field: _torch_dtype(name) for field, name in dtypes.items()})

    with _fake_tensors():
        model = construct(model_class, request.get("model_kwargs") or {}, request["file_name"])
        # A Linear whose weight is tied to another module (GPT-2's lm_head and wte) stays with the root:
        # FSDP2 refuses to shard one parameter in two units.
        owners: dict[int, set[str]] = {}
        for name, parameter in model.named_parameters(remove_duplicate=False):
            owners.setdefault(id(parameter), set()).add(name.rsplit(".", 1)[0])
        for module in model.modules():
            if isinstance(module, nn.Linear) and all(len(owners[id(p)]) == 1 for p in module.parameters()):
                fully_shard(module, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        settings = {
            "wrapped": "each nn.Linear (unless tied to another module), then the root",
            "tensors": "fake",
            **dtypes,
        }
        return _captured("fsdp2", model, request, world_size, SHAPE_BATCH, settings)


def tensor_parallel_plan(model, sequence_parallel: bool) -> dict:
    """Linear layers alternate column-/row-wise in forward order, as in Megatron's MLP pairs.

    An unpaired last column-wise layer gathers its output so the model's output stays whole. With
    sequence parallelism activations between pairs are sharded on dim 1 and norms/dropout run
    sequence-parallel, turning the all-reduces into all-gathers and reduce-scatters.
    """
    import torch.nn as nn
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel

    linears = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    plan = {}
    for index, name in enumerate(linears):
        column = index % 2 == 0
        last = index == len(linears) - 1
        if column:
            layouts = {"input_layouts": Shard(1)} if sequence_parallel else {}
            if last:
                layouts["output_layouts"] = Replicate()
            plan[name] = ColwiseParallel(**layouts)
        else:
            plan[name] = RowwiseParallel(output_layouts=Shard(1)) if sequence_parallel else RowwiseParallel()
    if sequence_parallel:
        for name, module in model.named_modules():
            if isinstance(module, nn.LayerNorm | nn.Dropout | getattr(nn, "RMSNorm", nn.LayerNorm)):
                plan[name] = SequenceParallel()
    return plan


def _sequence_slice(shape: list[int], world_size: int) -> list[int]:
    """With sequence parallelism each rank holds its slice of the sequence (the sample's first
    dimension), as in Megatron."""
    if shape[0] % world_size:
        raise ModelError(
            "bad_request",
            f"sequence parallelism splits the input's sequence dimension ({shape[0]}) over {world_size} ranks; "
            "it must divide evenly",
        )
    return [shape[0] // world_size, *shape[1:]]


def capture_tensor_parallel(model_class, request: dict, world_size: int, mesh, cap: dict, _inventory: dict) -> dict:
    from torch.distributed.tensor.parallel import parallelize_module

    sequence_parallel = bool(cap.get("sequence_parallel", False))
    shape = list(request["input_shape"])
    if sequence_parallel:
        shape = _sequence_slice(shape, world_size)
    with _fake_tensors():
        model = construct(model_class, request.get("model_kwargs") or {}, request["file_name"])
        plan = tensor_parallel_plan(model, sequence_parallel)
        parallelize_module(model, mesh, plan)
        settings = {
            "sequence_parallel": sequence_parallel,
            "plan": {name: type(style).__name__ for name, style in plan.items()},
            "tensors": "fake",
        }
        batch = int(cap.get("batch_size", SHAPE_BATCH))
        return _captured("tensor", model, request, world_size, batch, settings, shape)


CAPTURES = {"ddp": capture_ddp, "fsdp2": capture_fsdp2, "tensor": capture_tensor_parallel}


def capture_collectives(request: dict, inventory: dict) -> list[dict]:
    """The captures the request asks for; ``inventory`` is this model's, from ``describe_model``."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    cap = request["capture"]
    world_size = int(cap["world_size"])
    strategies = cap.get("strategies") or list(CAPTURES)
    unknown = [name for name in strategies if name not in CAPTURES]
    if unknown:
        raise ModelError("bad_request", f"unknown capture strategies {unknown}; known: {', '.join(CAPTURES)}")
    model_class = load_model_class(request["source"], request["file_name"], request["model_class"])
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        mesh = init_device_mesh("cpu", (world_size,))
        return [CAPTURES[name](model_class, request, world_size, mesh, cap, inventory) for name in strategies]
    finally:
        dist.destroy_process_group()


def handle(request: dict) -> dict:
    import torch

    # Only DDP's capture computes for real; two threads at most keep well inside the process limit.
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    answer = {"ok": True, "inventory": describe_model(request), "captures": []}
    if request.get("capture"):
        answer["captures"] = capture_collectives(request, answer["inventory"])
    return answer


def main() -> int:
    answer_stream = _claim_stdout()
    worker_pid = os.getpid()
    try:
        request = json.loads(sys.stdin.read())
        answer = handle(request)
    except ModelError as exc:
        answer = {"ok": False, "error": {"kind": exc.kind, "message": exc.message, "line": exc.line}}
    except BaseException as exc:  # SystemExit and KeyboardInterrupt from user code are failures too
        answer = {"ok": False, "error": {"kind": "failed", "message": _exception_text(exc)}}
    if os.getpid() != worker_pid:
        os._exit(1)  # a process the model forked: only the worker itself answers
    answer["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux counts KiB
    answer_stream.write(json.dumps(answer))
    answer_stream.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
