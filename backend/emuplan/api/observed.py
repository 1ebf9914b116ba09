"""The plan-vs-observed document (``results.analysis.plan_vs_observed``) as the API states it. Glue only."""

from typing import Literal

from pydantic import BaseModel, Field


class ObservedRow(BaseModel):
    """One (collective, size, group size) of the plan or of the job, per training step."""

    status: Literal["matched", "count differs", "size differs", "missing", "unexpected"]
    collective: str
    group_size: int | None
    planned_size_bytes: int | None = Field(description="The whole buffer (nccl-tests' size) the plan has, bytes.")
    observed_size_bytes: int | None = Field(description="The whole buffer the job sent, bytes.")
    planned_per_step: float
    observed_per_step: float = Field(description="Calls per step, per communicator of that kind.")
    planned_bytes_per_step: float
    observed_bytes_per_step: float


class ObservedAgainstPlan(BaseModel):
    """``GET /api/runs/{id}/observed-vs-plan`` and ``emuplan observed``: what the job sent per step against the plan."""

    run_id: int
    plan_id: int
    plan_name: str
    steps: int = Field(description="The training steps the job's calls were counted over.")
    rows: list[ObservedRow]
    counts: dict[str, int] = Field(description="Rows per status.")
    planned_bytes_per_step: float
    observed_bytes_per_step: float
    predicted_pct: float | None = Field(description="% of the observed bytes per step the plan predicted.")
    summary: str = Field(description="One line: what the plan predicted and what it did not.")
