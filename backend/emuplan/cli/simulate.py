"""``emuplan simulate``: one training step of a saved plan simulated with ASTRA-sim (EMUPLAN_ASTRA_SIM)."""

from typing import Annotated

import typer

from emuplan.cli.app import app, fail, in_store
from emuplan.simulate.options import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S
from emuplan.wording import plural, time_in
from emuplan.workload.chakra.gpus import DEFAULT_GPU, DEFAULT_UTILISATION, GPUS


@app.command("simulate")
def simulate(
    plan_id: Annotated[int, typer.Argument(help="A saved plan's id (emuplan plan --save, or the web page).")],
    gpu: str = typer.Option(DEFAULT_GPU, help=f"GPU whose dense bf16 peak times compute: {', '.join(GPUS)}."),
    utilisation: float = typer.Option(DEFAULT_UTILISATION, help="Fraction of the GPU's peak reached, in (0, 1]."),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT_S,
        "--timeout",
        min=0.001,
        max=MAX_TIMEOUT_S,
        help="Writing the traces and ASTRA-sim are stopped after this wall time (s).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the simulation document the API returns."),
) -> None:
    """Simulate one training step of a framework-mode plan with ASTRA-sim on the plan's own network (its hosts ×
    GPUs per host as rings at its link speed and α): each rank's simulated step, compute and exposed communication,
    beside the communication the plan's ideal times add up to. EMUPLAN_ASTRA_SIM names the binary; it runs under
    EMUPLAN_SIMULATOR_MEMORY_MB, and a plan whose estimated simulator memory passes it is refused before it starts."""
    # Imported here: the store, protobuf and the planner are only needed once the command runs.
    from emuplan.child_memory import MB
    from emuplan.services.simulations import plan_traces
    from emuplan.settings import get_settings
    from emuplan.simulate.astra_sim import SimulationError, SimulatorUnavailable, check_binary, simulate_plan
    from emuplan.simulate.memory import SimulationTooLarge, check_memory

    settings = get_settings()
    try:
        binary = check_binary(settings.astra_sim)
    except SimulatorUnavailable as error:
        fail(str(error))
    document, files = in_store(lambda session: plan_traces(session, plan_id, gpu, utilisation, allow_files=True))
    memory_limit = settings.simulator_memory_mb * MB
    try:
        check_memory(files.trace_set, memory_limit)
    except SimulationTooLarge as error:
        fail(str(error))
    ranks = document.inputs.gpus
    typer.echo(f"simulating plan {plan_id}'s {plural(ranks, 'rank')} with {binary.name} ...", err=True)
    typer.echo(f"  writing {plural(ranks, 'trace')}", err=True)

    def on_started() -> None:
        typer.echo(f"  traces written; {binary.name} running", err=True)

    def on_progress(done: int) -> None:
        typer.echo(f"  {done}/{ranks} ranks finished", err=True)

    try:
        simulation = simulate_plan(
            binary, document, files, gpu, utilisation, timeout_s=timeout, memory_limit_bytes=memory_limit,
            on_started=on_started, on_progress=on_progress,
        )  # fmt: skip
    except (SimulationError, SimulatorUnavailable) as error:
        fail(str(error))
    if as_json:
        typer.echo(simulation.model_dump_json(indent=1))
        return
    dimensions = simulation.network.dimensions
    link = dimensions[0]
    typer.echo(
        f"plan {plan_id}: {' × '.join(str(d.npus) for d in dimensions)} NPUs as rings, links "
        f"{link.bandwidth_gb_s:g} GB/s and {link.latency_ns:g} ns; compute at "
        f"{simulation.utilisation:.0%} of {GPUS[simulation.gpu].label}'s bf16 peak"
    )
    width = max(16, *(len(group.ranks_shown) for group in simulation.rank_groups))
    typer.echo(f"{'ranks':<{width}} {'count':>6} {'step (µs)':>12} {'compute (µs)':>13} {'exposed comm (µs)':>18}")
    for group in simulation.rank_groups:
        typer.echo(
            f"{group.ranks_shown:<{width}} {group.count:>6,} {time_in(group.step_ns / 1000):>12} "
            f"{time_in(group.compute_ns / 1000):>13} {time_in(group.exposed_comm_ns / 1000):>18}"
        )
    typer.echo(f"simulated step (slowest rank): {time_in(simulation.step_ns / 1000)} µs")
    planned = ", ".join(
        f"{item.parallel_dim} {time_in(item.time_us)} µs ({plural(item.collectives_per_step, 'collective')})"
        for item in simulation.planned_comm
    )
    typer.echo(f"planned communication per step (ideal, one after another): {planned}")
    if simulation.exit_note:
        typer.echo(f"note: {simulation.exit_note}")
