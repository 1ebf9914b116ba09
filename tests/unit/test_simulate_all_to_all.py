"""All-to-all simulated as NCCL runs it: ASTRA-sim's direct all-to-all with one message in flight matches a replay of
the same traces whose all-to-alls are NCCL's pairwise exchange (round k: send 1/n of the buffer to rank + k, receive
from rank − k; NCCL schedules a grouped all-to-all's sends and receives so), within 3 %, where ASTRA-sim's ring
all-to-all does not."""

import json

import pytest

from astra_sim_binary import requires_astra_sim
from emuplan.simulate.astra_sim import plan_network, run_astra_sim, simulate_plan, system_config
from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.bundle import GROUPS_FILE, attribute, bundle_files, decode_trace, delimited
from emuplan.workload.chakra.schedule import ComputeModel, build_traces
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model
from paths import ASTRA_SIM

PLANS = {
    "deepseek-v3 ep4": {"model": "deepseek-v3", "gpus": 4, "ep": 4, "batch_size": 4},
    "mixtral-8x7b ep8": {"model": "mixtral-8x7b", "gpus": 8, "ep": 8, "batch_size": 8},
}


def _p2p(node_id: int, name: str, kind: int, size: int, src: int, dst: int, tag: int, after: dict) -> et.Node:
    node = et.Node(id=node_id, name=name, type=kind, **after)
    node.attr.extend([
        et.AttributeProto(name="is_cpu_op", bool_val=False),
        et.AttributeProto(name="comm_size", int64_val=size),
        et.AttributeProto(name="comm_tag", int32_val=tag),
        et.AttributeProto(name="comm_src", int32_val=src),
        et.AttributeProto(name="comm_dst", int32_val=dst),
    ])  # fmt: skip
    return node


def pairwise_replay(files: dict[str, bytes]) -> dict[str, bytes]:
    """The bundle with every all-to-all replaced by n − 1 rounds of a send and a receive of 1/n of its buffer, each
    after the one before; the last receive keeps the all-to-all's id, so what waited for it waits for the rounds."""
    groups = {int(key): members for key, members in json.loads(files[GROUPS_FILE]).items()}
    replayed = dict(files)
    for name, content in files.items():
        if not name.endswith(".et"):
            continue
        rank = int(name.split(".")[-2])
        metadata, nodes = decode_trace(content)
        next_id = max(node.id for node in nodes) + 1
        issued: dict[int, int] = {}  # group → all-to-alls so far: the same count on every member
        written = []
        for node in nodes:
            if node.type != et.COMM_COLL_NODE or attribute(node, "comm_type") != et.ALL_TO_ALL:
                written.append(node)
                continue
            group = int(attribute(node, "pg_name"))
            members, occurrence = groups[group], issued.get(group, 0)
            issued[group] = occurrence + 1
            n, index, size = len(members), members.index(rank), attribute(node, "comm_size") // len(members)
            after = {"data_deps": list(node.data_deps), "ctrl_deps": list(node.ctrl_deps)}
            for k in range(1, n):
                tag = (group * 100_000 + occurrence) * 64 + k
                send = _p2p(next_id, f"{node.name} round {k} send", et.COMM_SEND_NODE, size, rank,
                            members[(index + k) % n], tag, after)  # fmt: skip
                receive_id = node.id if k == n - 1 else next_id + 1
                receive = _p2p(receive_id, f"{node.name} round {k} receive", et.COMM_RECV_NODE, size,
                               members[(index - k) % n], rank, tag, {"data_deps": [send.id]})  # fmt: skip
                written += [send, receive]
                next_id += 2
                after = {"data_deps": [receive.id]}
        replayed[name] = delimited(metadata) + b"".join(delimited(node) for node in written)
    return replayed


def test_all_to_all_runs_one_peer_at_a_time_in_every_dimension() -> None:
    assert system_config(2)["all-to-all-implementation"] == ["direct1", "direct1"]
    assert system_config(2)["all-reduce-implementation"] == ["ring", "ring"]


@requires_astra_sim
@pytest.mark.parametrize("name", PLANS)
def test_simulated_step_matches_a_pairwise_replay_within_3_percent(name: str) -> None:
    """Measured on the shared build: DeepSeek-V3 EP 4 5,744.6 ms against the pairwise replay's 5,861.4 (−2.0 %;
    the ring all-to-all gave 7,270.7, +24 %); Mixtral EP 8 745.997 ms against 745.986 (the ring gave 1,159.4, +55 %)."""
    request = PLANS[name]
    inventory = resolve_model(request["model"])
    document = plan_workload(PlanRequest(mode="framework", seq_len=1024, micro_batches=1, **request), inventory)
    files = dict(bundle_files(document, build_traces(document, inventory, ComputeModel.from_options()), "a test"))
    assert any(item.op is CollectiveOp.ALL_TO_ALL for item in document.collectives)
    simulated = simulate_plan(ASTRA_SIM, document, files, "h100-sxm", 0.4).step_ns
    replay = run_astra_sim(ASTRA_SIM, pairwise_replay(files), plan_network(document.inputs), document.inputs.gpus)
    pairwise = max(rank.step_ns for rank in replay.ranks)
    assert simulated == pytest.approx(pairwise, rel=0.03)
