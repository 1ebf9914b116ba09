"""Real PyTorch profiler traces of DDP training steps on a gloo group of CPU processes, one trace per rank.

``profiled_ddp_steps(build, make_input, folder)`` starts ``WORLD_SIZE`` processes, wraps ``build()`` in
``DistributedDataParallel`` with its defaults (the 1 MiB first bucket, 25 MiB after), and profiles
``PROFILED_STEPS`` steps after ``WARMUP_STEPS`` (DDP rebuilds its buckets in gradient-ready order after the
first step) with ``record_shapes`` and ``prof.step()`` marking each step; each rank exports its Chrome trace
to ``folder/rank<N>.json``. ``build`` and ``make_input`` must be importable module-level functions.

``ThreeLayers`` (two gradient buckets and two buffer broadcasts per step) and ``ddp_plan`` (its framework-mode
data-parallel plan on 2 ranks) are the model the tests profile and plan.
"""

import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, schedule

from emuplan.workload.document import PlanRequest
from emuplan.workload.inventory import SampleSpec
from emuplan.workload.planner import plan_workload
from emuplan.workload.torch_module import inventory_from_module
from ports import free_port

WORLD_SIZE = 2
WARMUP_STEPS = 2
PROFILED_STEPS = 2


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


def ddp_plan(**options):
    with torch.device("meta"):
        model = ThreeLayers().eval()  # batch norm refuses the inventory's one-sample batch in training mode
    inventory = inventory_from_module(model, "ThreeLayers", "test", SampleSpec(shape=[512], dtype="float32"))
    request = PlanRequest(
        model="ThreeLayers", strategy="data", mode="framework", gpus=2, param_dtype="float32", **options
    )
    return plan_workload(request, inventory)


def _rank(rank: int, port: int, build: Callable, make_input: Callable, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    torch.manual_seed(0)
    ddp = DistributedDataParallel(build())
    trace = str(Path(folder) / f"rank{rank}.json")
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=WARMUP_STEPS - 1, warmup=1, active=PROFILED_STEPS, repeat=1),
        record_shapes=True,
        on_trace_ready=lambda prof: prof.export_chrome_trace(trace),
    ) as prof:
        for _ in range(WARMUP_STEPS + PROFILED_STEPS):
            ddp(make_input()).float().sum().backward()
            ddp.zero_grad(set_to_none=True)
            prof.step()
    # Leave without tearing down, as tests/ddp_world.py does: the DDP reducer's destructor can deadlock with a
    # gloo worker that still needs the GIL.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def profiled_ddp_steps(build: Callable, make_input: Callable, folder: Path) -> list[Path]:
    mp.spawn(_rank, args=(free_port(), build, make_input, str(folder)), nprocs=WORLD_SIZE)
    return [folder / f"rank{rank}.json" for rank in range(WORLD_SIZE)]
