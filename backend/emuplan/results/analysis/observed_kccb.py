"""A KCCB trial from reality: the KCCB configuration that replays what a training job sent (an observed run,
``results.formats.observed``), exported as a plan's is (``workload.kccb.export_trials``).

One trial per (collective, group size): KCCB runs one collective algorithm over one set of hosts per trial.
Its data sizes are the sizes the job sent, in the order it first sent them, as KCCB takes them (the per-rank
piece for all-gather and reduce-scatter, the whole buffer otherwise); ``iterations`` is the number of training
steps the calls were counted over, as a plan's is its training steps; the note states the calls per step of
each size (per communicator, ``plan_vs_observed.calls_per_step``) and the communicators replayed. Hosts and GPUs
per host are those of the communicator spanning the most hosts; where the records name no host, one rank per
host (the seeds' set-up), said in the note. A collective KCCB has no algorithm for (reduce, barrier, …) or of
a group of unknown size cannot be replayed: a ``# not replayed`` line heads the YAML and the list.
"""

from emuplan.results.analysis.plan_vs_observed import calls_per_step
from emuplan.wording import plural
from emuplan.workload.collectives import PER_RANK_PIECE_OPS, CollectiveOp, normalise_op_name
from emuplan.workload.document import KccbTrial
from emuplan.workload.kccb import KCCB_ALGORITHMS, export_trials


class ObservedExportError(ValueError):
    """A run that gives no KCCB trial: not observed in training, or nothing KCCB can replay."""


def observed_kccb_trials(observed: dict, steps: int | None = None) -> tuple[list[KccbTrial], list[str]]:
    """The trials replaying ``observed`` (see the module's docstring) and what was skipped, one line each.
    ``steps``: the steps the records span, for records without steps (an NCCL Inspector dump)."""
    per_step, counted_steps = calls_per_step(observed, steps)
    hosts = {communicator["id"]: len(communicator["hosts"]) for communicator in observed["communicators"]}
    trials: dict[tuple[CollectiveOp, int], dict] = {}
    skipped: list[str] = []
    for group in observed["groups"]:
        key = (group["collective"], group["size_bytes"], group["group_size"])
        op = normalise_op_name(group["collective"])
        if op not in KCCB_ALGORITHMS or not group["group_size"]:
            reason = "KCCB has no algorithm for it" if op not in KCCB_ALGORITHMS else "its group's size is not recorded"
            line = f"{group['collective']} of {group['size_bytes']} B on {group['communicator']}: {reason}"
            if line not in skipped:
                skipped.append(line)
            continue
        if key not in per_step:  # called outside the steps only
            continue
        trial = trials.setdefault(
            (op, group["group_size"]), {"sizes": {}, "communicators": [], "hosts": 0, "unnamed_hosts": False}
        )
        piece = group["size_bytes"] // group["group_size"] if op in PER_RANK_PIECE_OPS else group["size_bytes"]
        trial["sizes"][piece] = per_step[key]
        if group["communicator"] not in trial["communicators"]:
            trial["communicators"].append(group["communicator"])
            trial["hosts"] = max(trial["hosts"], hosts.get(group["communicator"], 0))
            trial["unnamed_hosts"] |= not hosts.get(group["communicator"])
    return [_trial(op, size, trial, counted_steps) for (op, size), trial in trials.items()], skipped


def _trial(op: CollectiveOp, group_size: int, trial: dict, steps: int) -> KccbTrial:
    algorithm, algorithm_id = KCCB_ALGORITHMS[op]
    hosts = trial["hosts"] or group_size
    size_kind = "per-rank piece (whole buffer / group size)" if op in PER_RANK_PIECE_OPS else "whole buffer"
    calls = ", ".join(f"{count:g} of {size} B" for size, count in trial["sizes"].items())
    communicators = trial["communicators"]
    note = (
        f"replays a training job: group of {group_size} ranks ({plural(len(communicators), 'communicator')}: "
        f"{', '.join(communicators[:4])}{', ...' if len(communicators) > 4 else ''}); data sizes are the {size_kind}; "
        f"calls per training step (per communicator, over {plural(steps, 'step')}): {calls}"
    )
    if not trial["hosts"]:
        note += "; the records name no host: one rank per host"
    elif trial["unnamed_hosts"]:
        note += "; some communicators' records name no host"
    return KccbTrial(
        algorithm=algorithm,
        algorithm_id=algorithm_id,
        collective=op,
        data_sizes=list(trial["sizes"]),
        iterations=steps,
        hosts=hosts,
        gpus_per_host=-(-group_size // hosts),
        parallel_dim=None,
        group_size=group_size,
        note=note,
    )


def export_observed_kccb(run_id: int, name: str, observed: dict | None, export_format: str, steps: int | None) -> str:
    """``GET /api/runs/{id}/kccb`` and ``emuplan export-kccb``: the KCCB trials replaying observed run ``run_id``
    (its ``observed`` record, None for a run that was not observed) as YAML, JSON or a paste-ready list."""
    if observed is None:
        raise ObservedExportError(
            f"run {run_id} is not an observed run: a KCCB trial from reality needs a training job's records "
            "(an NCCL Inspector dump or PyTorch profiler traces); a plan exports its own"
        )
    trials, skipped = observed_kccb_trials(observed, steps)
    if not trials:
        raise ObservedExportError(
            f"run {run_id}: nothing KCCB can replay"
            + (f" ({'; '.join(skipped)})" if skipped else " (no call inside the training steps)")
        )
    return export_trials(trials, name, export_format, [f"not replayed: {line}" for line in skipped])
