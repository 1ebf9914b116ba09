"""Measure the demo's seed plans on this machine, printing progress, so the demo shows real timings.

Four local gloo processes, started once, measure the plans one after the other. The seed plans plan 8
trials; the demo runs ``DEMO_ITERATIONS`` so its CDFs have a body and a tail to look at, and says so in
the run's name and origin detail. Most of the time goes to starting the processes (importing torch)
and to the tensor-parallel plan's 25.8 MB all-gathers.
"""

import sys
from collections.abc import Callable, Mapping
from typing import Any

from emuplan.measure.launcher import LocalLauncher, MeasurementResult
from emuplan.measure.options import MeasurementOptions

DEMO_ITERATIONS = 40
# A machine whose loopback cannot carry gloo gives up after the timeout; generated runs stand in.
DEMO_OPTIONS = MeasurementOptions(world_size=4, backend="gloo", iterations=DEMO_ITERATIONS, warmup=1, timeout_s=120)


def print_to_terminal(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def demo_run_name(strategy: str, options: MeasurementOptions | None = None) -> str:
    options = options or DEMO_OPTIONS
    return (
        f"Demo {strategy} parallel (measured locally: {options.world_size} {options.backend} processes, "
        f"{options.iterations} iterations)"
    )


def measure_demo_plans(
    documents: Mapping[str, dict[str, Any]],
    options: MeasurementOptions | None = None,
    echo: Callable[[str], None] = print_to_terminal,
) -> dict[str, MeasurementResult]:
    """Measure the plan documents (keyed by strategy) in turn on one set of processes, with
    ``DEMO_OPTIONS`` unless told otherwise; raises ``MeasurementError`` on failure."""
    options = options or DEMO_OPTIONS
    strategies = list(documents)

    def on_event(event: dict[str, Any]) -> None:
        if event.get("event") == "launching":
            processes = f"{event['world_size']} local {event['backend']} processes"
            echo(f"demo: measuring the {len(strategies)} seed plans on {processes}")
        elif event.get("event") == "iteration" and (event["done"] % 10 == 0 or event["done"] == event["total"]):
            number = event["plan"] + 1
            echo(
                f"demo: seed plan {number}/{len(strategies)} ({strategies[event['plan']]} parallel): "
                f"iteration {event['done']}/{event['total']}"
            )

    results = LocalLauncher(list(documents.values()), options, on_event).run()
    return dict(zip(strategies, results, strict=True))
