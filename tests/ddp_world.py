"""Real PyTorch DDP on a gloo group of CPU processes: what it all-reduces and broadcasts per step.

``ddp_step_collectives(build, make_input, world_size, **ddp_options)`` starts ``world_size`` processes,
wraps ``build()`` in ``DistributedDataParallel`` with its defaults (or ``ddp_options``), runs three
training steps and returns, for the last (steady-state: DDP rebuilds its buckets in gradient-ready order
after the first), the bytes of each gradient bucket in launch order and of each broadcast DDP issued
before forward, and with find_unused_parameters its used-parameter map's all-reduce (``used_map``).
``build`` and ``make_input`` must be importable module-level functions (the processes are spawned).
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
from torch.nn.parallel import DistributedDataParallel
from torch.utils._python_dispatch import TorchDispatchMode

from ports import free_port

STEPS = 3


class _C10dLog(TorchDispatchMode):
    """Records the bytes of every c10d ``op`` (of ``dtype``, when given) dispatched while active."""

    def __init__(self, op: str, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.op, self.dtype = op, dtype
        self.sizes: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        matches = func.namespace == "c10d" and func.__name__.startswith(self.op)
        if matches and (self.dtype is None or args[0][0].dtype == self.dtype):
            self.sizes.append(sum(t.numel() * t.element_size() for t in args[0]))
        return func(*args, **(kwargs or {}))


def _rank(
    rank: int, world_size: int, port: int, build: Callable, make_input: Callable, out: str, ddp_options: dict
) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        torch.manual_seed(0)
        ddp = DistributedDataParallel(build(), **ddp_options)
        buckets: list[int] = []

        def record(_state, bucket):
            # allreduce_hook's work, done synchronously: its Python .then() callback is disposed on gloo's
            # worker thread, which then needs the GIL while the main thread, holding it, joins that thread
            # in the process group's destructor at exit: a deadlock that hung a test run once in many.
            buffer = bucket.buffer()
            buckets.append(buffer.numel() * buffer.element_size())
            dist.all_reduce(buffer.div_(world_size))
            future = torch.futures.Future()
            future.set_result(buffer)
            return future

        ddp.register_comm_hook(None, record)
        for _ in range(STEPS):
            buckets.clear()
            broadcasts, used_maps = _C10dLog("broadcast"), _C10dLog("allreduce", torch.int32)
            with broadcasts:
                output = ddp(make_input())
            with used_maps:
                output.float().sum().backward()
            ddp.zero_grad(set_to_none=True)
        if rank == 0:
            step = {"buckets": buckets, "broadcasts": broadcasts.sizes}
            # find_unused_parameters: the reducer's all-reduce of the parameters each rank used.
            Path(out).write_text(json.dumps({**step, "used_map": used_maps.sizes} if used_maps.sizes else step))
    finally:
        dist.destroy_process_group()
    # Leave without tearing down (as a measurement's ranks do, emuplan/measure/__main__.py): the DDP reducer's
    # destructor holds the GIL while it joins gloo's worker thread, and a worker still disposing of a finished
    # all_reduce needs the GIL for a Python object the work kept: a deadlock that hung a suite run at load 2.
    # An exception above never gets here: it reaches mp.spawn as usual.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def ddp_step_collectives(
    build: Callable, make_input: Callable, world_size: int = 2, **ddp_options
) -> dict[str, list[int]]:
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "rank0.json")
        mp.spawn(_rank, args=(world_size, free_port(), build, make_input, out, ddp_options), nprocs=world_size)
        return json.loads(Path(out).read_text())
