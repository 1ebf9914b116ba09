"""The JSON record rank 0 writes beside the per-iteration CSV, and the part of it a stored run needs.

The CSV carries only timings; the record says how they were taken (backend, ranks, hosts, iterations,
warm-up, how the timing threads were scheduled). A record from a torchrun job comes back as a file, so
it is checked field by field before anything is stored.
"""

from typing import Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emuplan.measure.workload import MeasurementError

RecordFormat = Literal["emuplan-measurement/1"]
RECORD_FORMAT: str = get_args(RecordFormat)[0]  # what the worker writes; the model accepts only this


class MeasurementSetup(BaseModel):
    """The record's fields a measured run is labelled with; the timestamps and the rest stay in the file."""

    model_config = ConfigDict(extra="ignore")

    format: RecordFormat
    backend: str = Field(min_length=1)
    world_size: int = Field(ge=1)
    hosts: list[str] = Field(min_length=1)
    iterations: int = Field(ge=1)
    warmup: int = Field(ge=0)
    scheduling: list[str] = Field(min_length=1, description="Per rank: its timing threads' scheduling policy.")


def measurement_setup(record: Any, source: str) -> MeasurementSetup:
    """``record`` checked; ``MeasurementError`` naming ``source`` and the first wrong field otherwise."""
    try:
        return MeasurementSetup.model_validate(record)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the record"
        raise MeasurementError(f"{source}: field {where}: {first['msg']}") from None


def rank_timestamps(
    record: dict[str, Any], setup: MeasurementSetup, source: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """The record's measured (warm-up dropped) start and end timestamps, shaped (ranks, iterations, calls) on
    rank 0's clock; None for a record without them. ``MeasurementError`` naming ``source`` when they do not
    fit the record (a torchrun record comes back as a file)."""
    if "rank_start_ns" not in record and "rank_end_ns" not in record:
        return None
    iterations = setup.warmup + setup.iterations
    expected = f"[rank][iteration][call] integer lists for {setup.world_size} ranks × {iterations} iterations"
    arrays = []
    for field in ("rank_start_ns", "rank_end_ns"):
        try:
            values = np.array(record.get(field), dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            raise MeasurementError(f"{source}: field {field}: expected {expected}") from None
        if values.shape[:2] != (setup.world_size, iterations) or values.ndim != 3:
            raise MeasurementError(f"{source}: field {field}: shaped {values.shape}, expected {expected}")
        arrays.append(values[:, setup.warmup :])
    start, end = arrays
    if start.shape != end.shape or (end < start).any():
        raise MeasurementError(f"{source}: field rank_end_ns: not the same shape as rank_start_ns or before it")
    return start, end
