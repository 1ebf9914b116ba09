"""Demo content, so a newcomer's first dashboard is not empty: the seed tutorials' three plans and
three runs to compare, saved as one comparison.

The runs are NOT KCCB results. On the run command's first start (``emuplan serve``) they are measured
on this machine — the seed plans' collectives on 4 local gloo processes (``emuplan.measure.demo``),
stored with ``origin="measured"``. Otherwise (an app created by ``create_app`` alone, as in tests, or
when measuring fails) they come from a seeded random generator shaped like the seed tutorials' charts (a tight body with
rare multi-second spikes), are stored with ``origin="generated"`` and every page that shows them says so.
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


def _seed_request(strategy: str):
    from emuplan.workload.document import PlanRequest
    from emuplan.workload.plan_options import Mode, Strategy

    return PlanRequest(model="fashion-mnist-mlp", strategy=Strategy(strategy), mode=Mode.TUTORIAL)


def _holds_content(session) -> bool:
    """Whether the database holds a plan, run or comparison: the demo goes only into one that holds none. Not the
    demo comparison's name: renamed or deleted (its page allows both), it brought every demo plan and run back on
    the next start, measured again, beside the ones kept."""
    from sqlmodel import select

    from emuplan.store.tables import Comparison, Plan, Run

    return any(session.exec(select(table.id).limit(1)).first() is not None for table in (Plan, Run, Comparison))


def _measure_seed_plans(database: Database) -> dict:
    """Measured results per strategy, or {} when the database holds content already or measuring fails."""
    from emuplan.measure.demo import measure_demo_plans, print_to_terminal
    from emuplan.measure.workload import MeasurementError
    from emuplan.services.plans import plan_request

    with database.read_session() as session:
        if _holds_content(session):
            return {}
        documents = {
            strategy: plan_request(_seed_request(strategy), session)[0].model_dump(mode="json")
            for strategy in SEED_STRATEGIES
        }
    try:
        return measure_demo_plans(documents)
    except MeasurementError as error:
        print_to_terminal(f"demo: measuring failed, generated runs stand in: {error}")
        return {}


def load_demo(database: Database, measure_locally: bool = False) -> bool:
    """Add the demo plans, runs and comparison to a database that holds no plan, run or comparison. True when
    added.

    With ``measure_locally`` the runs are measured on this machine first (progress on stderr), outside
    the transaction. Everything is then written in one transaction, so a failure leaves no half demo
    behind; a user who renames or deletes demo content later keeps the rest and is not given new ones.
    """
    from emuplan.measure.demo import demo_run_name
    from emuplan.results import parse_result_file
    from emuplan.services import imports as run_imports
    from emuplan.services.measurements import save_measured_run
    from emuplan.services.plans import create_plan
    from emuplan.store import comparisons

    measured = _measure_seed_plans(database) if measure_locally else {}
    with database.writing() as session:
        if _holds_content(session):
            return False
        run_ids = []
        for shape in DEMO_SHAPES:
            request = _seed_request(shape.strategy)
            plan = create_plan(session, request, f"Seed MLP: {shape.strategy} parallel (tutorial)")
            if shape.strategy in measured:
                result = measured[shape.strategy]
                run = save_measured_run(
                    session,
                    plan,
                    result.csv_text,
                    result.record,
                    notes=result.notes,
                    name=demo_run_name(shape.strategy),
                    tags=[DEMO_TAG],
                )
                run_ids.append(run.id)
                continue
            file_name = f"demo-{shape.strategy}-generated.csv"
            parsed = parse_result_file(generated_run_csv(shape), file_name)
            run = run_imports.save_run(
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
    logger.info("demo content added: 3 seed plans, 3 %s runs, 1 comparison", "measured" if measured else "generated")
    return True
