"""The ``torchrun`` command that measures a plan across machines with the same worker program."""

from emuplan.measure.options import DEFAULT_RENDEZVOUS, MeasurementOptions


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
