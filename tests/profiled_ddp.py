"""Real PyTorch profiler traces of DDP and FSDP2 training steps on a gloo group of CPU processes, one trace per rank.

``profiled_ddp_steps(build, make_input, folder)`` starts ``WORLD_SIZE`` processes, wraps ``build()`` in
``DistributedDataParallel`` with its defaults (the 1 MiB first bucket, 25 MiB after), and profiles
``PROFILED_STEPS`` steps after ``WARMUP_STEPS`` (DDP rebuilds its buckets in gradient-ready order after the
first step) with ``record_shapes`` and ``prof.step()`` marking each step; each rank exports its Chrome trace
to ``folder/rank<N>.json``. ``build`` and ``make_input`` must be importable module-level functions.

``profiled_fsdp2_steps(build, make_input, folder)`` does the same with FSDP2: ``fully_shard`` on each layer of
``build().body`` that has parameters and then on the root (the units the framework-mode plan shards), and
after each backward the loss is all-reduced over a second process group (``dist.new_group``, described
``"metrics"``), as training loops log it: a job with two communicators, one call of the second per step.

``ThreeLayers`` (two gradient buckets and two buffer broadcasts per step under DDP) and ``ddp_plan`` (its
framework-mode data-parallel plan on 2 ranks; ``dp_impl="fsdp2"`` for FSDP2's) are the model the tests
profile and plan.
"""

import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, schedule

from emuplan.store.db import Database
from emuplan.store.plans import save_document
from emuplan.workload.document import PlanRequest
from emuplan.workload.inventory import SampleSpec
from emuplan.workload.planner import plan_workload
from emuplan.workload.torch_module import inventory_from_module
from ports import free_port

WORLD_SIZE = 2
WARMUP_STEPS = 2
PROFILED_STEPS = 2
METRICS_GROUP = "metrics"


class ThreeLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(512, 1024), nn.BatchNorm1d(1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def three_layers_input() -> torch.Tensor:
    return torch.randn(4, 512)


def ddp_request(**options) -> PlanRequest:
    return PlanRequest(model="ThreeLayers", strategy="data", mode="framework", gpus=2, param_dtype="float32", **options)


def ddp_plan(**options):
    with torch.device("meta"):
        model = ThreeLayers().eval()  # batch norm refuses the inventory's one-sample batch in training mode
    inventory = inventory_from_module(model, "ThreeLayers", "test", SampleSpec(shape=[512], dtype="float32"))
    return plan_workload(ddp_request(**options), inventory)


def saved_ddp_plan(database: Database) -> int:
    """``ddp_plan()`` stored as its request makes it; its id."""
    with database.writing() as session:
        return save_document(session, ddp_plan(), ddp_request()).id


def fully_shard_layers(model: nn.Module) -> nn.Module:
    mesh = init_device_mesh("cpu", (WORLD_SIZE,))
    for layer in model.body:
        if any(True for _ in layer.parameters()):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def _rank(rank: int, port: int, job: tuple[Callable, Callable, Callable, bool], folder: str) -> None:
    build, wrap, make_input, log_loss = job
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    torch.manual_seed(0)
    model = wrap(build())
    metrics = dist.new_group(list(range(WORLD_SIZE)), group_desc=METRICS_GROUP) if log_loss else None
    trace = str(Path(folder) / f"rank{rank}.json")
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=WARMUP_STEPS - 1, warmup=1, active=PROFILED_STEPS, repeat=1),
        record_shapes=True,
        on_trace_ready=lambda prof: prof.export_chrome_trace(trace),
    ) as prof:
        for _ in range(WARMUP_STEPS + PROFILED_STEPS):
            loss = model(make_input()).float().sum()
            loss.backward()
            if metrics is not None:
                dist.all_reduce(loss.detach(), group=metrics)
            model.zero_grad(set_to_none=True)
            prof.step()
    # Leave without tearing down, as tests/ddp_world.py does: the DDP reducer's destructor can deadlock with a
    # gloo worker that still needs the GIL.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _profiled_steps(job: tuple[Callable, Callable, Callable, bool], folder: Path) -> list[Path]:
    mp.spawn(_rank, args=(free_port(), job, str(folder)), nprocs=WORLD_SIZE)
    return [folder / f"rank{rank}.json" for rank in range(WORLD_SIZE)]


def profiled_ddp_steps(build: Callable, make_input: Callable, folder: Path) -> list[Path]:
    return _profiled_steps((build, DistributedDataParallel, make_input, False), folder)


def profiled_fsdp2_steps(build: Callable, make_input: Callable, folder: Path) -> list[Path]:
    return _profiled_steps((build, fully_shard_layers, make_input, True), folder)
