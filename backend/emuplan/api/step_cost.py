"""The documents of a training step's cost (``results.analysis.step_cost``) as the API states them, and the query
parameters that choose the plan a run is read with. Glue only: every figure comes from
``results.analysis.step_cost``."""

from typing import Annotated, Literal

from fastapi import Query
from pydantic import BaseModel, Field

from emuplan.api.deps import DatabaseInt


class StepCostRow(BaseModel):
    """One collective of the plan: its time per call on the run and per step."""

    op: str
    label: str
    parallel_dim: str = Field(description="dp, tp, pp, ep or edp; unplanned for a training job's call the plan lacks.")
    phase: str
    group_size: int | None = Field(description="Ranks of its group; None where a training job's records do not say.")
    count_per_step: int | float = Field(description="Per step; a training job's own calls may average a fraction.")
    bytes_total: int = Field(description="The whole buffer (nccl-tests' size), bytes.")
    bytes_per_rank: int
    run_size_bytes: int = Field(description="The size looked up in the run, in the run's size convention.")
    basis: Literal["measured", "interpolated", "platform-scaled", "extrapolated", "missing"]
    missing_reason: str | None
    read_from_sizes: list[int] = Field(description="The measured sizes the time was read from.")
    time_p50_us: float | None = Field(description="Time of one call at the run's p50, µs (lower is better).")
    time_p99_us: float | None = Field(description="Time of one call at the run's p99, µs; None for a size sweep.")
    step_p50_us: float | None = Field(description="count_per_step × time_p50_us.")
    step_p99_us: float | None = Field(description="count_per_step × time_p99_us.")
    notes: list[str]


class StepTotals(BaseModel):
    """A step's (or one parallel dimension's, one collective kind's) collectives, bytes and time."""

    collectives_per_step: int | float
    bytes_per_step: int | float = Field(description="Σ count × whole buffer, bytes.")
    wire_bytes_per_rank_per_step: float = Field(
        description="Σ count × bytes one rank sends on a ring (nccl-tests' bus factor × the whole buffer)."
    )
    p50_us: float | None = Field(description="Σ count × time at p50, µs, of the collectives the run has.")
    p99_us: float | None = Field(description="Σ count × time at p99, µs; None for a size sweep.")
    missing_collectives: int | float = Field(description="Calls per step the run has no time for (not in the sums).")
    estimated_collectives: int | float = Field(
        description="Calls per step whose time is interpolated, platform-scaled or extrapolated."
    )


class StageTotals(StepTotals):
    """One pipeline stage's collectives on the run."""

    stage: int
    bounds_step: bool = Field(description="The stage whose p50 total is largest: the one `rows` and `step` are.")


class TrainingTotals(BaseModel):
    steps: int = Field(description="The plan's trials: steps of the whole training.")
    p50_s: float | None
    p99_s: float | None
    bytes: int | float


class PlanReference(BaseModel):
    id: int
    name: str
    strategy: str
    mode: str
    trials: int
    source: Literal["chosen", "linked"] = Field(description="Chosen for this view, or the run's linked plan.")


class StepCostDocument(BaseModel):
    """What one training step of ``plan`` costs on the run (``results.analysis.step_cost``)."""

    plan: PlanReference
    size_convention: str
    time_source: str
    variant: str | None = Field(description="The nccl-tests variant read (out-of-place), else None.")
    observed_steps: int | None = Field(
        description="A run observed in training: the steps its calls per step were counted over (its own step, "
        "not the plan's counts); None for a benchmark.",
    )
    stages: list[StageTotals] = Field(
        description="A pipelined plan: every stage costed on the run (their groups run concurrently); empty otherwise."
    )
    bounding_stage: int | None = Field(description="The stage `rows` and `step` are: the longest on this run.")
    convention: str
    rows: list[StepCostRow]
    by_dimension: dict[str, StepTotals]
    by_op: dict[str, StepTotals]
    step: StepTotals
    training: TrainingTotals
    time_unit: Literal["µs", "ms", "s"] = Field(description="The unit its rows are shown in.")
    us_per_unit: float


class StepCostComparisonRow(BaseModel):
    run_id: int
    name: str
    strategy: str | None
    plan: PlanReference | None
    step: StepTotals | None
    training: TrainingTotals | None
    ratio_p50: float | None = Field(description="This step at p50 ÷ the baseline's (lower is better).")
    ratio_p99: float | None
    cost: StepCostDocument | None


class StepCostComparison(BaseModel):
    """The runs' steps side by side: the table the compare page leads with."""

    baseline_run_id: int | None = Field(description="The run the ratios divide by (the first with a step cost).")
    rows: list[StepCostComparisonRow]
    ranking: list[int] = Field(description="Run ids with a step cost, cheapest step (p50) first.")
    without_plan: list[int]
    convention: str
    time_unit: Literal["µs", "ms", "s"] = Field(description="The unit the step times are shown in.")
    us_per_unit: float


PlanQuery = Annotated[
    DatabaseInt | None,
    Query(description="Read the run with this plan's collectives (default: the run's linked plan)."),
]
