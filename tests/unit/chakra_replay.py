"""A test oracle for Chakra bundles: structural checks, and a replay on the issue rules of ASTRA-sim's
workload layer, to tell whether a simulator would finish a bundle.

The rules replayed (astra-sim/workload/Workload.cc ``issue_dep_free_nodes``, HardwareResource.cc,
feeder_v3/dependancy_solver.cpp): a node is ready once every ``data_deps`` and ``ctrl_deps`` parent
is done; a rank issues its ready nodes in id order while the resource is free, with one compute and
one communication node (collective, send or receive) in flight at a time. The k-th collective a
rank issues on a communicator meets the k-th of every other member (ASTRA-sim numbers a group's
streams in issue order); a receive meets the send with its peer, tag and size; sends are eager.
Compute lasts ``duration_micros`` (at least 1), communication 1 once matched: only whether the
replay ends matters here, not when.
"""

import heapq
import json
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter

from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.bundle import GROUPS_FILE, attribute, decode_trace

COMMUNICATION = (et.COMM_COLL_NODE, et.COMM_SEND_NODE, et.COMM_RECV_NODE)


@dataclass
class Bundle:
    ranks: dict[int, list]  # rank → its nodes
    groups: dict[int, list[int]]  # pg_name → member ranks

    @classmethod
    def read(cls, files: dict[str, bytes]) -> "Bundle":
        ranks = {}
        for name, content in files.items():
            if name.endswith(".et"):
                metadata, nodes = decode_trace(content)
                ranks[int(name.split(".")[-2])] = nodes
        groups = {int(key): members for key, members in json.loads(files[GROUPS_FILE]).items()}
        return cls(ranks, groups)


def _p2p_key(node) -> tuple[int, int, int, int]:
    return (
        attribute(node, "comm_src"),
        attribute(node, "comm_dst"),
        attribute(node, "comm_tag"),
        attribute(node, "comm_size"),
    )


def collective_key(node) -> tuple[int, int]:
    return attribute(node, "comm_type"), attribute(node, "comm_size")


def check_graphs(bundle: Bundle) -> None:
    """Per rank: unique ids, every dependency a node of the rank, no cycle, no CPU op, and every
    communication node a positive size (ASTRA-sim refuses a zero-byte collective)."""
    for rank, nodes in bundle.ranks.items():
        ids = [node.id for node in nodes]
        assert len(ids) == len(set(ids)), f"rank {rank}: duplicate node ids"
        graph = {node.id: set(node.data_deps) | set(node.ctrl_deps) for node in nodes}
        for node_id, parents in graph.items():
            assert parents <= graph.keys(), f"rank {rank}: node {node_id} depends on missing {parents - graph.keys()}"
        try:
            TopologicalSorter(graph).prepare()
        except CycleError as error:
            raise AssertionError(f"rank {rank}: dependency cycle {error.args[1]}") from None
        for node in nodes:
            assert attribute(node, "is_cpu_op") is False
            if node.type in COMMUNICATION:
                assert attribute(node, "comm_size") > 0, f"rank {rank}: {node.name} has no bytes"


def check_collective_orders(bundle: Bundle) -> None:
    """Every member of a communicator issues the same collectives (type, size) in the same id order,
    and only members use it."""
    sequences: dict[int, dict[int, list]] = defaultdict(dict)
    for rank, nodes in bundle.ranks.items():
        for node in nodes:
            if node.type == et.COMM_COLL_NODE:
                group = int(attribute(node, "pg_name"))
                assert rank in bundle.groups[group], f"rank {rank} uses group {group} {bundle.groups[group]}"
                sequences[group].setdefault(rank, []).append(collective_key(node))
    for group, by_rank in sequences.items():
        written = [rank for rank in bundle.groups[group] if rank in bundle.ranks]
        assert sorted(by_rank) == written, f"group {group}: only ranks {sorted(by_rank)} of {written} use it"
        first = by_rank[written[0]]
        for rank in written[1:]:
            assert by_rank[rank] == first, f"group {group}: rank {rank} differs from rank {written[0]}"


def check_point_to_point(bundle: Bundle) -> None:
    """Every send has exactly one receive with its source, destination, tag and size, and back."""
    sends, recvs = Counter(), Counter()
    for rank, nodes in bundle.ranks.items():
        for node in nodes:
            if node.type == et.COMM_SEND_NODE:
                assert attribute(node, "comm_src") == rank
                sends[_p2p_key(node)] += 1
            elif node.type == et.COMM_RECV_NODE:
                assert attribute(node, "comm_dst") == rank
                recvs[_p2p_key(node)] += 1
    assert sends == recvs, f"unmatched: sends {sends - recvs}, receives {recvs - sends}"
    assert set(sends.values()) <= {1}, "a tag is used twice on one link"


@dataclass
class _Rank:
    nodes: dict[int, object]
    children: dict[int, list[int]]
    waiting_on: dict[int, int]  # node id → parents not done yet
    ready: list[int] = field(default_factory=list)  # a heap of ids
    compute_busy: bool = False
    comm_busy: bool = False
    done: int = 0


class ReplayStuck(AssertionError):
    """The replay cannot go on: what each unfinished rank waits for."""


def replay(bundle: Bundle) -> int:
    """Runs the bundle to the end and returns the simulated finish time (µs); raises ReplayStuck."""
    ranks: dict[int, _Rank] = {}
    for rank, nodes in bundle.ranks.items():
        children: dict[int, list[int]] = defaultdict(list)
        waiting_on = {}
        for node in nodes:
            parents = set(node.data_deps) | set(node.ctrl_deps)
            waiting_on[node.id] = len(parents)
            for parent in parents:
                children[parent].append(node.id)
        state = _Rank({node.id: node for node in nodes}, children, waiting_on)
        state.ready = [node_id for node_id, count in waiting_on.items() if count == 0]
        heapq.heapify(state.ready)
        ranks[rank] = state

    events: list[tuple[int, int, int, int]] = []  # (time, sequence, rank, node id)
    sequence = 0
    collective_queues: dict[int, dict[int, deque]] = defaultdict(lambda: defaultdict(deque))
    sent: set[tuple] = set()  # sends issued whose receive is not posted yet
    posted: dict[tuple, tuple[int, int]] = {}  # receive key → (rank, node id) waiting for its send
    now = 0

    def finish_at(time: int, rank: int, node_id: int) -> None:
        nonlocal sequence
        heapq.heappush(events, (time, sequence, rank, node_id))
        sequence += 1

    def match_collectives(group: int) -> None:
        queues = collective_queues[group]
        members = [rank for rank in bundle.groups[group] if rank in ranks]
        while all(queues[rank] for rank in members):
            heads = [queues[rank].popleft() for rank in members]
            keys = {collective_key(ranks[rank].nodes[node_id]) for rank, node_id in zip(members, heads, strict=True)}
            if len(keys) > 1:
                names = [ranks[rank].nodes[node_id].name for rank, node_id in zip(members, heads, strict=True)]
                raise ReplayStuck(f"group {group} matched different collectives {sorted(keys)}: {names}")
            for rank, node_id in zip(members, heads, strict=True):
                finish_at(now + 1, rank, node_id)

    def issue(rank: int) -> None:
        state = ranks[rank]
        deferred = []
        while state.ready:
            node_id = heapq.heappop(state.ready)
            node = state.nodes[node_id]
            is_comm = node.type in COMMUNICATION
            if state.comm_busy if is_comm else state.compute_busy:
                deferred.append(node_id)
                continue
            if not is_comm:
                state.compute_busy = True
                finish_at(now + max(1, node.duration_micros), rank, node_id)
                continue
            state.comm_busy = True
            if node.type == et.COMM_COLL_NODE:
                group = int(attribute(node, "pg_name"))
                collective_queues[group][rank].append(node_id)
                match_collectives(group)
            elif node.type == et.COMM_SEND_NODE:
                key = _p2p_key(node)
                finish_at(now + 1, rank, node_id)
                if key in posted:
                    finish_at(now + 1, *posted.pop(key))
                else:
                    sent.add(key)
            else:
                key = _p2p_key(node)
                if key in sent:
                    sent.remove(key)
                    finish_at(now + 1, rank, node_id)
                else:
                    posted[key] = (rank, node_id)
        for node_id in deferred:
            heapq.heappush(state.ready, node_id)

    for rank in ranks:
        issue(rank)
    while events:
        now = events[0][0]
        touched = set()
        while events and events[0][0] == now:
            _, _, rank, node_id = heapq.heappop(events)
            state = ranks[rank]
            if state.nodes[node_id].type in COMMUNICATION:
                state.comm_busy = False
            else:
                state.compute_busy = False
            state.done += 1
            for child in state.children.get(node_id, ()):
                state.waiting_on[child] -= 1
                if state.waiting_on[child] == 0:
                    heapq.heappush(state.ready, child)
            touched.add(rank)
        for rank in sorted(touched):
            issue(rank)
    stuck = {rank: state for rank, state in ranks.items() if state.done < len(state.nodes)}
    if stuck:
        lines = []
        for rank, state in sorted(stuck.items())[:4]:
            blocked = [state.nodes[i].name for i in sorted(state.ready)[:2]]
            in_flight = [
                state.nodes[node_id].name for queues in collective_queues.values() for node_id in queues.get(rank, ())
            ] + [state.nodes[node_id].name for (r, node_id) in posted.values() if r == rank]
            lines.append(f"rank {rank}: {state.done}/{len(state.nodes)} done, in flight {in_flight}, ready {blocked}")
        raise ReplayStuck(f"replay stuck at {now} µs: " + "; ".join(lines))
    return now


def check_bundle(files: dict[str, bytes]) -> int:
    """Every check above on one bundle; returns the replay's finish time."""
    bundle = Bundle.read(files)
    check_graphs(bundle)
    check_collective_orders(bundle)
    check_point_to_point(bundle)
    return replay(bundle)
