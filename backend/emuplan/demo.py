"""Demo content, so a newcomer's first dashboard is not empty: the seed tutorials' three plans and
three runs to compare, saved as one comparison.

The runs are NOT KCCB results. Until runs measured on this machine exist, they come from a seeded
random generator shaped like the seed tutorials' charts (a tight body with rare multi-second spikes),
are stored with ``origin="generated"`` and every page that shows them says so.
"""

import io
import logging
from dataclasses import dataclass

import numpy as np

from emuplan.store.db import Database

logger = logging.getLogger(__name__)

DEMO_COMPARISON_NAME = "Demo: data vs tensor vs pipeline"
DEMO_TAG = "demo"
DEMO_SEED = 20261121
GENERATED_ORIGIN_DETAIL = (
    "generated demo data, not a KCCB result: seeded random generator (seed {seed}) shaped like the seed "
    "tutorials' CDF and delay charts"
)


@dataclass(frozen=True)
class GeneratedShape:
    """One demo run: a log-normal body around ``median_ms`` and rare spikes between the tail bounds."""

    strategy: str
    collective: str
    sizes: tuple[int, ...]
    median_ms: float
    spread: float
    spike_probability: float
    spike_low_ms: float
    spike_high_ms: float
    iterations: int


# The seed tutorials' charts: data parallel ~14 ms with tails to 5 s, tensor ~100 ms with tails to
# 4 s, pipeline ~20 ms with tails of 4-12 s. Sizes are the seed plans' KCCB data sizes.
DEMO_SHAPES = (
    GeneratedShape("data", "all_reduce", (971048,), 14.0, 0.12, 0.004, 250.0, 5000.0, 2000),
    GeneratedShape("tensor", "all_gather", (6438912,), 100.0, 0.08, 0.004, 400.0, 4000.0, 2000),
    GeneratedShape("pipeline", "all_reduce", (2600, 33024, 131584, 803840), 20.0, 0.15, 0.002, 4000.0, 12000.0, 500),
)


def generated_run_csv(shape: GeneratedShape, seed: int = DEMO_SEED) -> bytes:
    """A per-iteration CSV (iteration, data size, collective, completion time in ms) for one demo run."""
    rng = np.random.default_rng([seed, DEMO_SHAPES.index(shape)])
    out = io.StringIO()
    out.write("iteration,data_size_bytes,collective,completion_time_ms\n")
    for size_index, size in enumerate(shape.sizes):
        # Bigger messages take a little longer: a few percent per size step, as in the seed's pipeline chart.
        body = rng.lognormal(np.log(shape.median_ms * (1 + 0.05 * size_index)), shape.spread, shape.iterations)
        spikes = rng.random(shape.iterations) < shape.spike_probability
        body[spikes] = np.exp(rng.uniform(np.log(shape.spike_low_ms), np.log(shape.spike_high_ms), spikes.sum()))
        for iteration, milliseconds in enumerate(body):
            out.write(f"{iteration},{size},{shape.collective},{milliseconds:.4f}\n")
    return out.getvalue().encode()


SEED_STRATEGIES = ("data", "tensor", "pipeline")


def load_demo(database: Database) -> bool:
    """Add the demo plans, runs and comparison unless the demo comparison exists. True when added.

    Everything is written in one transaction, so a failure leaves no half demo behind; a user who
    deletes demo runs later keeps the rest and is not given new ones.
    """
    from emuplan.results import parse_result_file
    from emuplan.store import comparisons, plans, runs
    from emuplan.workload.document import Mode, PlanRequest, Strategy

    with database.writing() as session:
        if comparisons.find_comparison_by_name(session, DEMO_COMPARISON_NAME) is not None:
            return False
        run_ids = []
        for shape in DEMO_SHAPES:
            request = PlanRequest(model="fashion-mnist-mlp", strategy=Strategy(shape.strategy), mode=Mode.TUTORIAL)
            plan = plans.create_plan(session, request, f"Seed MLP: {shape.strategy} parallel (tutorial)")
            file_name = f"demo-{shape.strategy}-generated.csv"
            parsed = parse_result_file(generated_run_csv(shape), file_name)
            run = runs.save_run(
                session,
                parsed,
                name=f"Demo {shape.strategy} parallel (generated)",
                plan_id=plan.id,
                strategy=shape.strategy,
                tags=[DEMO_TAG],
                origin="generated",
                origin_detail=GENERATED_ORIGIN_DETAIL.format(seed=DEMO_SEED),
                file_name=file_name,
            )
            run_ids.append(run.id)
        comparisons.create_comparison(session, DEMO_COMPARISON_NAME, run_ids, run_ids[0], {"log_x": True})
    logger.info("demo content added: 3 seed plans, 3 generated runs, 1 comparison")
    return True
