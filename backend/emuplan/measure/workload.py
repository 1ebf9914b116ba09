"""Which collectives a measurement runs, with which byte sizes, in which order.

Two views of a plan document can be measured:

- ``kccb`` (default): the KCCB export — each ``kccb`` object's data-size list, in KCCB order, with
  its collective kind. This is what the seed tutorials configure and what an imported KCCB run
  measured, so a measured run and a KCCB run of the same plan compare like for like.
- ``collectives``: every entry of the list the KCCB export was built from (``captured`` when the
  plan's ``kccb_source`` says so, else ``collectives``) in plan order, each repeated
  ``count_per_step`` times. This is the only view that holds point-to-point pipeline sends.

One measured iteration issues every step once, in order (one training step, a KCCB "trial").

Byte sizes follow nccl-tests: ``bytes_total`` is the whole buffer. All-reduce, broadcast and reduce
hand the collective one buffer of ``bytes_total``; all-gather takes a per-rank input of
``bytes_total / n`` and fills an output of ``bytes_total``; reduce-scatter the reverse; all-to-all
sends and receives ``bytes_total`` per rank (``bytes_total / n`` to each peer); send/recv sends one
message of ``bytes_total`` from one pipeline stage to another, stage k on rank k. The stages come from
the planner's label ("stage 0 → 1 activation", "stage 2 → 1 activation gradient"); without one, a
forward send goes from rank 0 to rank 1 and a backward send back.
"""

import re
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import ValidationError

from emuplan.errors import EmuplanError
from emuplan.measure.options import WorkloadSource
from emuplan.workload.collectives import PER_RANK_PIECE_OPS, CollectiveOp, normalise_op_name
from emuplan.workload.document import PlannedCollective, collective_of_size
from emuplan.workload.inventory import DTYPE_BYTES


class MeasurementError(EmuplanError, ValueError):
    """The plan cannot be measured as asked, or the measurement itself failed."""

    http_status = 422


# The element types a measurement sends as themselves (torch.distributed takes them on every backend);
# any other dtype (or a size that does not divide) runs as bytes, the same number of bytes on the wire.
MEASURED_DTYPES = ("float64", "float32", "bfloat16", "float16", "int64", "int32", "uint8")

# Ops whose buffer is cut into n equal pieces: a per-rank piece (all-gather, reduce-scatter) or a
# per-peer chunk (all-to-all).
SPLIT_OPS = (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_TO_ALL)


@dataclass(frozen=True)
class MeasuredCollective:
    """One collective call of an iteration and the buffer sizes rank 0 hands to torch.distributed."""

    op: CollectiveOp
    bytes_total: int
    input_bytes: int
    output_bytes: int
    dtype: str
    label: str
    planned_group_size: int | None = None
    ideal_time_us: float | None = None
    # Point-to-point only: the ranks of the sending and the receiving pipeline stage.
    sender: int | None = None
    receiver: int | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def plan_document_of(document: dict[str, Any]) -> dict[str, Any]:
    """The workload document itself, whether given bare or wrapped in a stored plan's JSON."""
    if "collectives" not in document and "kccb" not in document and isinstance(document.get("workload"), dict):
        return document["workload"]
    return document


def buffer_sizes(op: CollectiveOp, bytes_total: int, world_size: int) -> tuple[int, int]:
    """(input, output) bytes a rank hands the call under the nccl-tests convention; for send/recv the
    sender's message and the receiver's buffer."""
    if op is CollectiveOp.ALL_GATHER:
        return bytes_total // world_size, bytes_total
    if op is CollectiveOp.REDUCE_SCATTER:
        return bytes_total, bytes_total // world_size
    return bytes_total, bytes_total


_STAGE_PAIR = re.compile(r"stage (\d+) (?:→|->) (\d+)")


def _stage_pair(planned: dict[str, Any], world_size: int, where: str) -> tuple[int, int]:
    match = _STAGE_PAIR.search(str(planned.get("label") or ""))
    if match:
        sender, receiver = int(match[1]), int(match[2])
    else:
        sender, receiver = (1, 0) if planned.get("phase") == "backward" else (0, 1)
    if max(sender, receiver) >= world_size:
        raise MeasurementError(
            f"{where}: send/recv from stage {sender} to stage {receiver} needs at least "
            f"{max(sender, receiver) + 1} ranks; measuring with {world_size}"
        )
    return sender, receiver


def _element_type(dtype: str | None, op: CollectiveOp, bytes_total: int, world_size: int) -> str:
    pieces = world_size if op in SPLIT_OPS else 1
    if dtype in MEASURED_DTYPES and bytes_total % (DTYPE_BYTES[dtype] * pieces) == 0:
        return dtype
    return "uint8"


def make_step(
    op: CollectiveOp, bytes_total: int, world_size: int, planned: dict[str, Any], *, label: str, where: str
) -> MeasuredCollective:
    """A step of ``bytes_total`` bytes; ``planned`` is the plan's collective entry it measures (or {})."""
    if bytes_total <= 0:
        raise MeasurementError(f"{where}: {op.value} of {bytes_total} bytes cannot be measured (size must be > 0)")
    if op in SPLIT_OPS and bytes_total % world_size:
        raise MeasurementError(
            f"{where}: {op.value} of {bytes_total} bytes does not split into {world_size} equal per-rank pieces; "
            f"choose a world size that divides it"
        )
    if op is CollectiveOp.SEND_RECV and world_size < 2:
        raise MeasurementError(f"{where}: send/recv between pipeline stages needs a world size of at least 2")
    sender, receiver = _stage_pair(planned, world_size, where) if op is CollectiveOp.SEND_RECV else (None, None)
    input_bytes, output_bytes = buffer_sizes(op, bytes_total, world_size)
    return MeasuredCollective(
        op=op,
        bytes_total=bytes_total,
        input_bytes=input_bytes,
        output_bytes=output_bytes,
        dtype=_element_type(planned.get("dtype"), op, bytes_total, world_size),
        label=str(planned.get("label") or label),
        planned_group_size=planned.get("group_size"),
        ideal_time_us=planned.get("ideal_time_us"),
        sender=sender,
        receiver=receiver,
    )


def _op_of(value: Any, where: str) -> CollectiveOp:
    op = normalise_op_name(str(value)) if value is not None else None
    if op is None:
        raise MeasurementError(f"{where}: unknown collective {value!r}; known: {', '.join(CollectiveOp)}")
    return op


def _kccb_op(kccb: dict[str, Any], where: str) -> CollectiveOp:
    if kccb.get("collective") is not None:
        return _op_of(kccb["collective"], f"{where}.collective")
    algorithm = str(kccb.get("algorithm", ""))
    # KAI's enum names start with the collective: ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING, ALGO_ALL_GATHER_RING, ...
    for op in CollectiveOp:
        if algorithm.startswith(f"ALGO_{op.name}"):
            return op
    raise MeasurementError(f"{where}: neither 'collective' nor a known 'algorithm' ({algorithm!r}) names an op")


def exported_collectives(document: dict[str, Any]) -> list[Any]:
    """The list the plan's KCCB export was built from: PyTorch's captured collectives where the plan
    says so (``kccb_source``), else the analytic ``collectives``."""
    if document.get("kccb_source") == "captured":
        return document.get("captured") or []
    return document.get("collectives") or []


def _planned_collectives(document: dict[str, Any]) -> list[PlannedCollective]:
    """The plan's collectives a KCCB data size can stand for; a hand-written entry that is not a whole
    ``PlannedCollective`` stands for none (its size then comes from the KCCB trial alone)."""
    planned = []
    for entry in exported_collectives(document):
        try:
            planned.append(PlannedCollective.model_validate(entry))
        except ValidationError:
            continue
    return planned


def _planned_collective(
    collectives: list[PlannedCollective], kccb: dict[str, Any], op: CollectiveOp, size: int
) -> dict[str, Any] | None:
    """The plan's collective a KCCB data size stands for, within the parallel dimension and group size
    the KCCB trial names."""
    planned = collective_of_size(
        collectives, op, size, parallel_dim=kccb.get("parallel_dim"), group_size=kccb.get("group_size")
    )
    return planned.model_dump(mode="json") if planned else None


def _kccb_bytes_total(kccb: dict[str, Any], op: CollectiveOp, size: int, where: str) -> int:
    """The whole buffer a KCCB data size stands for when the plan lists no matching collective."""
    if op not in PER_RANK_PIECE_OPS:
        return size
    group_size = kccb.get("group_size")
    if not isinstance(group_size, int) or group_size < 1:
        raise MeasurementError(
            f"{where}: {size} bytes of {op.value} is a per-rank piece, but the trial names no group_size to "
            f"multiply it by"
        )
    return size * group_size


def _kccb_objects(document: dict[str, Any]) -> list[dict[str, Any]]:
    kccb = document.get("kccb")
    if isinstance(kccb, dict):
        return [kccb]
    if isinstance(kccb, list) and kccb and all(isinstance(item, dict) for item in kccb):
        return kccb
    raise MeasurementError("plan: 'kccb' must be an object or a non-empty list of objects")


def _kccb_steps(document: dict[str, Any], world_size: int) -> list[MeasuredCollective]:
    steps = []
    collectives = _planned_collectives(document)
    for kccb_index, kccb in enumerate(_kccb_objects(document)):
        where = f"plan.kccb[{kccb_index}]"
        op = _kccb_op(kccb, where)
        sizes = kccb.get("data_sizes")
        if not isinstance(sizes, list) or not sizes:
            raise MeasurementError(f"{where}.data_sizes: expected a non-empty list of byte counts")
        for size_index, size in enumerate(sizes):
            size_where = f"{where}.data_sizes[{size_index}]"
            if not isinstance(size, int) or isinstance(size, bool):
                raise MeasurementError(f"{size_where}: expected an integer byte count, got {size!r}")
            planned = _planned_collective(collectives, kccb, op, size)
            bytes_total = planned["bytes_total"] if planned else _kccb_bytes_total(kccb, op, size, size_where)
            label = f"{op.value} {size} B"
            steps.append(make_step(op, bytes_total, world_size, planned or {}, label=label, where=size_where))
    return steps


def _collective_list_steps(document: dict[str, Any], world_size: int) -> list[MeasuredCollective]:
    entries = exported_collectives(document)
    name = "captured" if document.get("kccb_source") == "captured" else "collectives"
    if not isinstance(entries, list) or not entries:
        raise MeasurementError(f"plan.{name}: expected a non-empty list")
    steps = []
    for index, entry in enumerate(entries):
        where = f"plan.{name}[{index}]"
        bytes_total = entry.get("bytes_total")
        if not isinstance(bytes_total, int) or isinstance(bytes_total, bool):
            raise MeasurementError(f"{where}.bytes_total: expected an integer byte count, got {bytes_total!r}")
        count = entry.get("count_per_step", 1)
        if not isinstance(count, int) or count < 1:
            raise MeasurementError(f"{where}.count_per_step: expected a positive integer, got {count!r}")
        op = _op_of(entry.get("op"), f"{where}.op")
        step = make_step(op, bytes_total, world_size, entry, label=f"{op.value} {bytes_total} B", where=where)
        steps.extend([step] * count)
    return steps


def measurement_steps(
    document: dict[str, Any], world_size: int, source: WorkloadSource = WorkloadSource.KCCB
) -> list[MeasuredCollective]:
    """The collectives one measured iteration runs, in order, sized for ``world_size`` ranks."""
    if world_size < 1:
        raise MeasurementError(f"world size must be at least 1, got {world_size}")
    document = plan_document_of(document)
    if source is WorkloadSource.KCCB:
        return _kccb_steps(document, world_size)
    return _collective_list_steps(document, world_size)


def planned_trials(document: dict[str, Any]) -> int:
    """The plan's trial count: the number of measured iterations unless the user asks otherwise."""
    document = plan_document_of(document)
    trials = document.get("trials")
    if not isinstance(trials, int) or trials < 1:
        kccb = _kccb_objects(document)[0]
        trials = kccb.get("iterations")
    if not isinstance(trials, int) or trials < 1:
        raise MeasurementError(f"plan.trials: expected a positive integer, got {trials!r}")
    return trials


def group_size_notes(steps: list[MeasuredCollective], world_size: int) -> list[str]:
    """Say where the plan's group differs from the ranks measured: the buffer keeps ``bytes_total``.
    Point-to-point sends always involve their two stages, whatever the world size."""
    mismatched = sorted(
        {
            (step.op.value, step.planned_group_size)
            for step in steps
            if step.op is not CollectiveOp.SEND_RECV and step.planned_group_size not in (None, world_size)
        }
    )
    return [
        f"the plan runs {op} over groups of {size} ranks; measured over all {world_size} ranks with the plan's "
        f"bytes_total"
        for op, size in mismatched
    ]
