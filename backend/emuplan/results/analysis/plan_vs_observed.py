"""A plan against what the training job really sent (an observed run: ``results.formats.observed``), per training step.

Both sides are reduced to rows keyed by (collective, size, group size), sizes in nccl-tests' convention (the
whole buffer) on both. The plan's side sums ``count_per_step`` over its collectives of one key (one bucket
per layer may repeat a size). The observed side counts the calls that fell inside the job's training steps
(``ProfilerStep#N``) ÷ the number of steps, per communicator (several data-parallel groups each run the
step's all-reduces: they are averaged, not added); a record without steps (an NCCL Inspector dump) needs the
number of steps it spans from the caller.

Each row is ``matched`` (same key, same count per step), ``count differs`` (same key), ``size differs`` (a
planned key with no observed one, paired with an observed key of the same collective and group size the plan
does not have, in order of size), ``missing`` (planned, never seen) or ``unexpected`` (seen, not planned),
with the bytes per step each side. The plan predicted the bytes of matched keys up to the smaller count.
"""

from collections import defaultdict

from emuplan.wording import size_label
from emuplan.workload.document import PlanDocument

STATUSES = ("matched", "count differs", "size differs", "missing", "unexpected")


class ObservedComparisonError(ValueError):
    """An observed run that cannot be compared with a plan as asked (no steps, not an observed run)."""


def _planned_rows(document: PlanDocument) -> dict[tuple[str, int, int], float]:
    counts: dict[tuple[str, int, int], float] = defaultdict(float)
    for item in document.collectives:
        counts[(item.op.value, item.bytes_total, item.group_size)] += item.count_per_step
    return dict(counts)


def calls_per_step(observed: dict, steps: int | None) -> tuple[dict[tuple[str, int, int | None], float], int]:
    """Calls per step per (collective, size, group size), per communicator of that key, and the number of steps
    they were counted over: the job's own steps, else ``steps`` (all its calls; a record without steps)."""
    if steps is None:
        steps = len(observed["steps"])
        if steps == 0:
            raise ObservedComparisonError(
                "the run records no training steps (an NCCL Inspector dump has none): say how many steps it spans"
            )
        counted = "calls_in_steps"
    elif steps < 1:
        raise ObservedComparisonError(f"steps: {steps} is not a positive number of steps")
    else:
        counted = "calls"
    calls: dict[tuple, float] = defaultdict(float)
    communicators: dict[tuple, set[str]] = defaultdict(set)
    for group in observed["groups"]:
        key = (group["collective"], group["size_bytes"], group["group_size"])
        calls[key] += group[counted]
        communicators[key].add(group["communicator"])
    return {key: total / steps / len(communicators[key]) for key, total in calls.items() if total}, steps


def _row(status: str, planned: tuple | None, planned_count: float, observed: tuple | None, observed_count: float):
    key = planned or observed
    return {
        "status": status,
        "collective": key[0],
        "group_size": key[2],
        "planned_size_bytes": planned[1] if planned else None,
        "observed_size_bytes": observed[1] if observed else None,
        "planned_per_step": planned_count,
        "observed_per_step": observed_count,
        "planned_bytes_per_step": planned_count * planned[1] if planned else 0,
        "observed_bytes_per_step": observed_count * observed[1] if observed else 0,
    }


def compare_plan_with_observed(document: PlanDocument, observed: dict, *, steps: int | None = None) -> dict:
    """Rows (see the module's docstring), the bytes per step each side, and a one-line summary."""
    planned = _planned_rows(document)
    seen, counted_steps = calls_per_step(observed, steps)
    rows = []
    for key in sorted(planned.keys() & seen.keys()):
        status = "matched" if abs(planned[key] - seen[key]) < 1e-9 else "count differs"
        rows.append(_row(status, key, planned[key], key, seen[key]))
    unplanned = sorted(seen.keys() - planned.keys(), key=lambda k: (k[0], k[2] or 0, k[1]))
    for key in sorted(planned.keys() - seen.keys(), key=lambda k: (k[0], k[2], k[1])):
        partner = next((k for k in unplanned if (k[0], k[2]) == (key[0], key[2])), None)
        if partner is None:
            rows.append(_row("missing", key, planned[key], None, 0.0))
        else:
            unplanned.remove(partner)
            rows.append(_row("size differs", key, planned[key], partner, seen[partner]))
    rows.extend(_row("unexpected", None, 0.0, key, seen[key]) for key in unplanned)
    planned_bytes = sum(row["planned_bytes_per_step"] for row in rows)
    observed_bytes = sum(row["observed_bytes_per_step"] for row in rows)
    predicted = sum(
        min(row["planned_per_step"], row["observed_per_step"]) * row["planned_size_bytes"]
        for row in rows
        if row["status"] in ("matched", "count differs")
    )
    predicted_pct = predicted / observed_bytes * 100 if observed_bytes else None
    return {
        "steps": counted_steps,
        "rows": rows,
        "counts": {status: sum(row["status"] == status for row in rows) for status in STATUSES},
        "planned_bytes_per_step": planned_bytes,
        "observed_bytes_per_step": observed_bytes,
        "predicted_pct": predicted_pct,
        "summary": _summary(rows, predicted_pct),
    }


def _calls(count: float, collective: str, size_bytes: int, word: str) -> str:
    shown = f"{count:g}" if count != int(count) else str(int(count))
    name = collective.replace("_", "-") + ("" if count == 1 else "s")
    return f"{shown} {word} {name} of {size_label(size_bytes)}"


def _summary(rows: list[dict], predicted_pct: float | None) -> str:
    """'plan predicted 96 % of the bytes per step; 3 unexpected all-gathers of 16 KiB'."""
    parts = [
        "nothing observed inside the steps"
        if predicted_pct is None
        else f"plan predicted {predicted_pct:.0f} % of the bytes per step"
    ]
    for row in rows:
        if row["status"] == "unexpected":
            parts.append(_calls(row["observed_per_step"], row["collective"], row["observed_size_bytes"], "unexpected"))
        elif row["status"] == "missing":
            parts.append(_calls(row["planned_per_step"], row["collective"], row["planned_size_bytes"], "missing"))
        elif row["status"] == "size differs":
            parts.append(
                f"{row['collective'].replace('_', '-')} of {size_label(row['observed_size_bytes'])} where the plan "
                f"has {size_label(row['planned_size_bytes'])}"
            )
        elif row["status"] == "count differs":
            parts.append(
                f"{row['collective'].replace('_', '-')} of {size_label(row['planned_size_bytes'])}: "
                f"{row['observed_per_step']:g} per step, planned {row['planned_per_step']:g}"
            )
    return "; ".join(parts)
