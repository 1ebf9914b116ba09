"""The JSON record rank 0 writes beside the per-iteration CSV, and the part of it a stored run needs.

The CSV carries only timings; the record says how they were taken (backend, ranks, hosts, iterations,
warm-up, how the timing threads were scheduled). A record from a torchrun job comes back as a file, so
it is checked field by field before anything is stored.
"""

from typing import Any, Literal, get_args

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
