import pytest

from emuplan.workload.collectives import (
    CollectiveOp,
    bus_bandwidth_factor,
    bus_bandwidth_gbps,
    ideal_time_s,
    normalise_op_name,
)


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("AllReduce", CollectiveOp.ALL_REDUCE),
        ("Ring all-reduce", CollectiveOp.ALL_REDUCE),
        ("all_gather_perf", CollectiveOp.ALL_GATHER),
        ("ReduceScatter", CollectiveOp.REDUCE_SCATTER),
        ("alltoall", CollectiveOp.ALL_TO_ALL),
        ("broadcast", CollectiveOp.BROADCAST),
        ("sendrecv", CollectiveOp.SEND_RECV),
    ],
)
def test_op_names_from_files_are_folded(name: str, op: CollectiveOp) -> None:
    assert normalise_op_name(name) is op


def test_unknown_op_name_is_none() -> None:
    assert normalise_op_name("gossip") is None


def test_bus_bandwidth_factors_follow_nccl_tests() -> None:
    assert bus_bandwidth_factor(CollectiveOp.ALL_REDUCE, 4) == 1.5
    assert bus_bandwidth_factor(CollectiveOp.ALL_GATHER, 4) == 0.75
    assert bus_bandwidth_factor(CollectiveOp.BROADCAST, 4) == 1.0
    # 1 GB in 1 s over 16 ranks of all-reduce: busbw = 2*15/16 GB/s
    assert bus_bandwidth_gbps(CollectiveOp.ALL_REDUCE, 1e9, 1.0, 16) == pytest.approx(1.875)


def test_ideal_ring_all_reduce_of_the_seed_gradient() -> None:
    # 4 ranks, 100 Gbit/s, 5 us: 6*5us + 1.5*971048 B / 12.5e9 B/s
    expected = 6 * 5e-6 + 1.5 * 971048 / 12.5e9
    assert ideal_time_s(CollectiveOp.ALL_REDUCE, 971048, 4, 100, 5) == pytest.approx(expected)
    assert ideal_time_s(CollectiveOp.ALL_GATHER, 4 * 6438912, 4, 100, 5) == pytest.approx(
        3 * 5e-6 + 0.75 * 4 * 6438912 / 12.5e9
    )
    assert ideal_time_s(CollectiveOp.SEND_RECV, 1e6, 2, 100, 5) == pytest.approx(5e-6 + 1e6 / 12.5e9)
