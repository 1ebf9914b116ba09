"""Measure the demo's seed plans on this machine, printing progress, so the demo shows real timings.

Four local gloo processes per plan, one plan after the other. The seed plans plan 8 trials; the demo
runs ``DEMO_ITERATIONS`` so its CDFs have a body and a tail to look at, and says so in the run's name
and origin detail. The three seed plans take about 20–40 s on 2 cores, most of it starting processes
and the tensor-parallel plan's 25.8 MB all-gathers.
"""

import sys
from collections.abc import Callable, Mapping
from typing import Any

from emuplan.measure.launcher import MeasurementOptions, MeasurementResult, run_local_measurement

DEMO_ITERATIONS = 40
# A machine whose loopback cannot carry gloo gives up after one timeout; generated runs stand in.
DEMO_OPTIONS = MeasurementOptions(world_size=4, backend="gloo", iterations=DEMO_ITERATIONS, warmup=1, timeout_s=60)


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
    """Measure each plan document (keyed by strategy) in turn with ``DEMO_OPTIONS`` unless told
    otherwise; raises ``MeasurementError`` on the first failure."""
    options = options or DEMO_OPTIONS
    results = {}
    for number, (strategy, document) in enumerate(documents.items(), start=1):
        prefix = f"demo: measuring seed plan {number}/{len(documents)} ({strategy} parallel)"

        def on_event(event: dict[str, Any], prefix: str = prefix) -> None:
            if event.get("event") == "launching":
                echo(f"{prefix}: starting {event['world_size']} local {event['backend']} processes")
            elif event.get("event") == "iteration" and (event["done"] % 10 == 0 or event["done"] == event["total"]):
                echo(f"{prefix}: iteration {event['done']}/{event['total']}")

        results[strategy] = run_local_measurement(document, options, on_event)
    return results
