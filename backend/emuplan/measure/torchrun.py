"""The ``torchrun`` command that measures a plan across machines with the same worker program."""

from typing import Any

from emuplan.measure.launcher import MeasurementOptions
from emuplan.measure.workload import plan_document_of

DEFAULT_RENDEZVOUS = "HEAD_NODE:29500"


def cluster_shape(document: dict[str, Any]) -> tuple[int, int]:
    """(hosts, GPUs per host) the plan was made for: torchrun's --nnodes and --nproc-per-node."""
    document = plan_document_of(document)
    inputs = document.get("inputs") or {}
    kccb = document.get("kccb")
    first_trial = (kccb[0] if isinstance(kccb, list) and kccb else kccb) or {}
    hosts = inputs.get("hosts") or first_trial.get("hosts") or 1
    gpus_per_host = inputs.get("gpus_per_host") or first_trial.get("gpus_per_host") or 1
    return int(hosts), int(gpus_per_host)


def torchrun_command(
    plan_file: str,
    output_file: str,
    options: MeasurementOptions,
    *,
    nnodes: int,
    nproc_per_node: int,
    rendezvous: str = DEFAULT_RENDEZVOUS,
    run_id: str = "emuplan-measure",
) -> list[str]:
    """Run the same command on every node; rank 0 (on the rendezvous node) writes ``output_file``."""
    return [
        "torchrun",
        f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={rendezvous}",
        f"--rdzv-id={run_id}",
        "-m",
        "emuplan.measure",
        "--plan",
        plan_file,
        "--output",
        output_file,
        *options.worker_arguments(),
    ]
