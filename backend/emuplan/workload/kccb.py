"""KCCB trial configurations from planned collectives, and their export as YAML, JSON or a plain list.

KAI DC Builder's benchmark runs one collective algorithm over one set of hosts per trial, so the
collectives are grouped by (operation, parallel dimension, group size); each group is one trial.
Data sizes keep the order in which a training step first issues them (forward, backward,
optimizer). All-gather and reduce-scatter enter KCCB as the per-rank piece, as the seed tutorial
does (its 6438912 is a quarter of 25755648); all-reduce as the whole buffer.
"""

import json
from collections.abc import Iterable

from emuplan.wording import plural
from emuplan.workload.collectives import PER_RANK_PIECE_OPS, CollectiveOp
from emuplan.workload.document import KccbTrial, ParallelDim, PlanDocument, PlannedCollective
from emuplan.workload.plan_options import EXPORT_FORMATS

# kccb.Benchmark.collective_algorithm enum values (DESIGN §1.3). Point-to-point sends have no KCCB
# algorithm; a broadcast between the two ranks of a stage pair moves the same bytes one way.
KCCB_ALGORITHMS: dict[CollectiveOp, tuple[str, int]] = {
    CollectiveOp.ALL_REDUCE: ("ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING", 10),
    CollectiveOp.ALL_GATHER: ("ALGO_ALL_GATHER_RING", 20),
    CollectiveOp.REDUCE_SCATTER: ("ALGO_REDUCE_SCATTER_RING", 30),
    CollectiveOp.BROADCAST: ("ALGO_BROADCAST_PARALLEL", 40),
    CollectiveOp.SEND_RECV: ("ALGO_BROADCAST_PARALLEL", 40),
    CollectiveOp.ALL_TO_ALL: ("ALGO_ALL_TO_ALL_PARALLEL", 1),
}


def group_placement(group_size: int, stride: "int | tuple[int, int]", gpus_per_host: int) -> tuple[int, int]:
    """Hosts and GPUs per host spanned by the group holding rank 0: ranks 0, stride, 2·stride, …; or, for a
    stride (run, stride), runs of consecutive ranks starting stride apart (TP groups inside an EP group)."""
    run, step = (1, stride) if isinstance(stride, int) else stride
    ranks = ((index // run) * step + index % run for index in range(group_size))
    hosts = len({rank // gpus_per_host for rank in ranks})
    return hosts, -(-group_size // hosts)


def kccb_trials(
    collectives: Iterable[PlannedCollective],
    iterations: int,
    strides: "dict[ParallelDim, int | tuple[int, int]]",
    gpus_per_host: int,
) -> list[KccbTrial]:
    groups: dict[tuple[CollectiveOp, ParallelDim, int], list[PlannedCollective]] = {}
    for item in collectives:
        groups.setdefault((item.op, item.parallel_dim, item.group_size), []).append(item)
    trials = []
    for (op, dim, group_size), items in groups.items():
        if op not in KCCB_ALGORITHMS:
            raise ValueError(f"collective: KCCB has no algorithm for {op.value}")
        algorithm, algorithm_id = KCCB_ALGORITHMS[op]
        sizes = list(dict.fromkeys(item.kccb_data_size for item in items))
        hosts, per_host = group_placement(group_size, strides[dim], gpus_per_host)
        note = _trial_note(op, dim, group_size, items)
        trials.append(
            KccbTrial(
                algorithm=algorithm,
                algorithm_id=algorithm_id,
                collective=op,
                data_sizes=sizes,
                iterations=iterations,
                hosts=hosts,
                gpus_per_host=per_host,
                parallel_dim=dim,
                group_size=group_size,
                note=note,
            )
        )
    return trials


def _trial_note(op: CollectiveOp, dim: ParallelDim, group_size: int, items: list[PlannedCollective]) -> str:
    per_step = sum(item.count_per_step for item in items)
    size_kind = "per-rank piece (bytes_total / group size)" if op in PER_RANK_PIECE_OPS else "whole buffer"
    note = (
        f"{dim.value} group of {group_size} ranks; data sizes are the {size_kind}; "
        f"{per_step} {op.value} per training step in all"
    )
    if op is CollectiveOp.SEND_RECV:
        note += "; pipeline point-to-point sends emulated as a broadcast from one stage to the next"
    if op is CollectiveOp.ALL_TO_ALL:
        note += (
            " (MoE token dispatch and combine, and the routing probabilities; each data size is one rank's whole "
            "send buffer, as nccl-tests)"
        )
    return note


def _comment(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)


def _trials_yaml(trials: list[KccbTrial], title: str, comments: list[str]) -> str:
    """Trial configs shaped like KAI's ``kccb.Benchmark`` and infrastructure protobuf fields."""
    import yaml  # only this export needs it; planning (and every CLI command's start-up) goes without

    configs = [
        {
            "name": f"{title} {trial.collective.value} "
            f"{trial.parallel_dim.value if trial.parallel_dim else 'group'}{trial.group_size}",
            "benchmark": {
                "collective_algorithm": trial.algorithm,
                "datasize_list": {"size_bytes": trial.data_sizes},
                "iterations": trial.iterations,
            },
            "infrastructure": {
                "host": {"count": trial.hosts, "generic": {"npu_count": trial.gpus_per_host}},
                "rocev2": {"qps_per_rankpair": 1},
            },
            "note": trial.note,
        }
        for trial in trials
    ]
    return _comment(comments) + yaml.safe_dump({"trials": configs}, sort_keys=False, width=120)


def _trials_json(trials: list[KccbTrial], title: str, comments: list[str]) -> str:
    # JSON has no comments: the caller says them elsewhere.
    return json.dumps([trial.model_dump(mode="json") for trial in trials], indent=2)


def _trials_text(trials: list[KccbTrial], title: str, comments: list[str]) -> str:
    """Paste-ready: one block per trial, data sizes one per line as KCCB's Data Size dialog takes them."""
    blocks = []
    for number, trial in enumerate(trials, start=1):
        lines = [
            f"# trial {number}: {trial.algorithm} ({trial.algorithm_id}), iterations {trial.iterations}, "
            f"{plural(trial.hosts, 'host')} x {plural(trial.gpus_per_host, 'GPU')} per host",
            *(str(size) for size in trial.data_sizes),
        ]
        blocks.append("\n".join(lines))
    return _comment(comments) + "\n\n".join(blocks) + "\n"


EXPORTERS = dict(zip(EXPORT_FORMATS, (_trials_yaml, _trials_json, _trials_text), strict=True))


def export_trials(trials: list[KccbTrial], title: str, export_format: str, comments: list[str] = ()) -> str:
    """``trials`` as YAML (KAI's field names, each trial named ``title`` and its collective and group), JSON or
    a paste-ready list, YAML and the list headed by ``comments`` as ``#`` lines: a plan's export
    (``export_kccb``) and a training job's (``results.analysis.observed_kccb``)."""
    if export_format not in EXPORTERS:
        raise ValueError(f"format: unknown KCCB export format {export_format!r}; use one of {', '.join(EXPORTERS)}")
    return EXPORTERS[export_format](trials, title, list(comments))


def export_kccb(document: PlanDocument, export_format: str) -> str:
    return export_trials(document.kccb_list(), f"{document.model.name} {document.strategy.value}", export_format)
