"""Real PyTorch FSDP2 on a gloo group of CPU processes: the collectives of one steady-state step.

``fsdp2_step_collectives(build, make_input, param_dtype, reduce_dtype)`` starts 2 processes (``world_size``),
applies ``fully_shard`` to each ``nn.Linear`` and then the root (as the sandbox's capture does) with
``MixedPrecisionPolicy(param_dtype, reduce_dtype)``, runs two training steps and returns the second's
c10d collectives in issue order: (op, phase, dtype, bytes), bytes being the whole buffer (the larger of
an all-gather's or reduce-scatter's two tensors). A step accumulates gradients over ``micro_batches``
forward and backward passes before the optimizer steps; with ``sync_last_only`` the model is told
``set_requires_gradient_sync(False)`` before all but the last, as FSDP2 offers for accumulating without
communication. ``build`` and ``make_input`` must be importable module-level functions (the processes are
spawned).

``fsdp2_pipeline_collectives(build_stage, make_input, output_shape, micro_batches, schedule)`` runs 2 pipeline
stages × 2 data-parallel replicas on 4 processes: ``build_stage(index)`` is a stage's module, sharded like the
above over its replicas and driven by ``torch.distributed.pipelining`` (``schedule``: ``Schedule1F1B`` or
``ScheduleGPipe``); it returns each stage's c10d calls of the second step, (op, "step", dtype, bytes), sends and
receives included.
"""

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils._python_dispatch import TorchDispatchMode

from ports import free_port

STEPS = 2


class _Collectives(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.records: list[tuple[str, str, str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "c10d":
            tensors = [t for t in torch.utils._pytree.tree_leaves(args) if isinstance(t, torch.Tensor)]
            whole = max(t.numel() * t.element_size() for t in tensors)
            self.records.append((func.__name__, self.phase, str(tensors[0].dtype).removeprefix("torch."), whole))
        return func(*args, **(kwargs or {}))


def _rank(
    rank: int, world_size: int, port: int, build: Callable, make_input: Callable, dtypes: tuple[str, str],
    accumulation: tuple[int, bool], out: str,
) -> None:  # fmt: skip
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    micro_batches, sync_last_only = accumulation
    try:
        torch.manual_seed(0)
        model = build()
        policy = MixedPrecisionPolicy(param_dtype=getattr(torch, dtypes[0]), reduce_dtype=getattr(torch, dtypes[1]))
        mesh = init_device_mesh("cpu", (world_size,))
        for module in model.modules():
            if isinstance(module, nn.Linear):
                fully_shard(module, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(STEPS):
            log = _Collectives()
            with log:
                for micro_batch in range(micro_batches):
                    if sync_last_only:
                        model.set_requires_gradient_sync(micro_batch == micro_batches - 1)
                    log.phase = "forward"
                    output = model(make_input())
                    log.phase = "backward"
                    output.float().sum().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            Path(out).write_text(json.dumps(log.records))
    finally:
        dist.destroy_process_group()
    # As in ddp_world: leave without tearing down, so no gloo worker thread waits for the GIL at exit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def fsdp2_step_collectives(
    build: Callable,
    make_input: Callable,
    param_dtype: str,
    reduce_dtype: str,
    world_size: int = 2,
    micro_batches: int = 1,
    sync_last_only: bool = False,
) -> list[tuple[str, str, str, int]]:
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "rank0.json")
        accumulation = (micro_batches, sync_last_only)
        args = (world_size, free_port(), build, make_input, (param_dtype, reduce_dtype), accumulation, out)
        mp.spawn(_rank, args=args, nprocs=world_size)
        return [tuple(record) for record in json.loads(Path(out).read_text())]


def _pipeline_rank(
    rank: int, port: int, build_stage: Callable, make_input: Callable, output_shape: list[int],
    schedule: tuple[str, int], folder: str,
) -> None:  # fmt: skip
    from torch.distributed import pipelining

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=4)
    try:
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("pp", "dp"))
        stage_index = mesh["pp"].get_local_rank()
        torch.manual_seed(stage_index)
        module = build_stage(stage_index)
        for layer in module.modules():
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh["dp"])
        fully_shard(module, mesh=mesh["dp"])
        stage = pipelining.PipelineStage(module, stage_index, 2, torch.device("cpu"), group=mesh["pp"].get_group())
        name, micro_batches = schedule
        driver = getattr(pipelining, name)(stage, micro_batches, loss_fn=lambda output, _target: output.sum())
        optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
        for _ in range(STEPS):
            log = _Collectives()
            log.phase = "step"
            with log:
                if stage_index == 0:
                    driver.step(make_input())
                else:
                    driver.step(target=torch.zeros(output_shape))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if mesh["dp"].get_local_rank() == 0:
            (Path(folder) / f"stage{stage_index}.json").write_text(json.dumps(log.records))
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def fsdp2_pipeline_collectives(
    build_stage: Callable, make_input: Callable, output_shape: list[int], micro_batches: int, schedule: str
) -> list[list[tuple[str, str, str, int]]]:
    with tempfile.TemporaryDirectory() as folder:
        args = (free_port(), build_stage, make_input, output_shape, (schedule, micro_batches), folder)
        mp.spawn(_pipeline_rank, args=args, nprocs=4)
        return [
            [tuple(record) for record in json.loads((Path(folder) / f"stage{index}.json").read_text())]
            for index in range(2)
        ]
