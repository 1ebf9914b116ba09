"""Which collective an nccl-tests log or -J report holds: its content first (the test's binary, then its
redop/root/count cells), then the explicit choice, then the file name, else 'unknown'."""

import json

import pytest

from emuplan.results import ResultFileError, parse_result_file, summarise
from emuplan.results.canonical import collective_from_file_name
from emuplan.results.formats.nccl_tests_shared import Cells, collectives_fitting_cells
from paths import NCCL_TESTS, SHARED_NCCL

B200 = SHARED_NCCL / "b200-allreduce-2.17.6.txt"
A100 = SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"
BROADCAST = SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"
# alltoall before NCCL 2.13: a blank redop cell and no root, count = size ÷ 4 ÷ 64: all_gather's cells too.
ALLTOALL = NCCL_TESTS / "v100-64rank-alltoall-pre2.13.txt"


def collectives(parsed) -> set[str]:
    return set(parsed.samples["collective"].to_pylist())


def figures(parsed) -> dict:
    """The statistics the run page shows, as import computes them."""
    return summarise(
        parsed.samples, ranks=parsed.ranks, reported_avg_busbw=parsed.reported_avg_busbw, elements=parsed.elements
    )


def test_the_b200_all_reduce_log_renamed_slurm_4242_out_is_all_reduce_with_the_same_figures():
    renamed = parse_result_file(B200.read_bytes(), "slurm-4242.out")
    well_named = parse_result_file(B200.read_bytes(), B200.name)
    assert collectives(renamed) == {"all_reduce"}
    assert renamed.samples.equals(well_named.samples)
    assert (renamed.ranks, renamed.elements, renamed.reported_avg_busbw) == (
        well_named.ranks,
        well_named.elements,
        well_named.reported_avg_busbw,
    )
    assert figures(renamed) == figures(well_named)
    largest = figures(renamed)["groups"][-1]
    assert (largest["label"], largest["mean_us"], largest["busbw_gbps"]) == (
        "all_reduce · 2147483648 B · in-place",
        5728.40,
        pytest.approx(702.9069, abs=1e-4),  # 2·15/16 × 2 GiB ÷ 5728.40 µs (16 ranks from the factor); log: 702.91
    )


def test_a_log_that_names_no_test_is_read_by_its_cells():
    # No '<op>_perf' anywhere: redop sum, root -1 and count × 4 bytes = size leave all_reduce (busbw/algbw
    # 222.88 / 118.87 = 1.875 = 2·15/16: not send/recv's 1).
    parsed = parse_result_file(A100.read_bytes(), "slurm-4242.out")
    assert collectives(parsed) == {"all_reduce"}
    assert (parsed.ranks, parsed.hosts) == (16, 2)
    assert not any("collective" in warning for warning in parsed.warnings)


def test_the_broadcast_fixture_renamed_is_broadcast():
    parsed = parse_result_file(BROADCAST.read_bytes(), "slurm-4243.out")
    assert collectives(parsed) == {"broadcast"}  # root 0, no redop, count × 4 = size


def test_the_content_wins_over_the_file_name_and_says_so():
    parsed = parse_result_file(BROADCAST.read_bytes(), "allreduce-run.log")
    assert collectives(parsed) == {"broadcast"}
    assert "allreduce-run.log: line 18: the file name says all_reduce, but its redop/root/count cells fit only " \
        "broadcast: broadcast is used" in parsed.warnings  # fmt: skip


def test_an_explicit_choice_the_content_contradicts_is_refused_naming_both():
    with pytest.raises(ResultFileError) as refused:
        parse_result_file(A100.read_bytes(), "x.txt", collective="all_gather")
    assert str(refused.value) == (
        "x.txt: line 22: collective 'all_gather' was given, but its redop/root/count cells fit only all_reduce; "
        "leave the collective out (a run can be relabelled after import)"
    )
    with pytest.raises(ResultFileError, match="the file itself names the all_reduce test"):
        parse_result_file(B200.read_bytes(), "x.txt", collective="broadcast")


def test_an_explicit_choice_the_content_agrees_with_is_taken_in_any_spelling():
    assert collectives(parse_result_file(B200.read_bytes(), "x.txt", collective="AllReduce")) == {"all_reduce"}


@pytest.mark.parametrize(
    ("file_name", "collective", "expected"),
    [
        ("slurm-1.out", "all_to_all", "all_to_all"),  # the explicit choice first
        ("alltoall.txt", "all_gather", "all_gather"),  # … before the file name
        ("alltoall.txt", None, "all_to_all"),  # then the file name
        ("slurm-1.out", None, "unknown"),
    ],
)
def test_an_ambiguous_log_falls_back_to_the_explicit_choice_then_the_file_name_then_unknown(
    file_name, collective, expected
):
    parsed = parse_result_file(ALLTOALL.read_bytes(), file_name, collective=collective)
    assert collectives(parsed) == {expected}
    undecided = f"{file_name}: line 3: its redop/root/count cells fit only all_gather or all_to_all; pass the " \
        "collective explicitly"  # fmt: skip
    assert (undecided in parsed.warnings) == (expected == "unknown")


def test_an_ambiguous_log_refuses_a_choice_its_cells_exclude():
    with pytest.raises(ResultFileError, match="'broadcast' was given, but its redop/root/count cells fit only "):
        parse_result_file(ALLTOALL.read_bytes(), "slurm-1.out", collective="broadcast")


def json_report(args: list[str], result: dict) -> bytes:
    """A -J report in the shape nccl-tests' src/util.cu writes: redop and root as text ('%6i' for the root)."""
    return json.dumps({"version": 2, "args": args, "results": [result]}).encode()


def one_result(count: int, redop: str, root: str, alg_bw: float, bus_bw: float) -> dict:
    timing = {"time": 100.0, "alg_bw": alg_bw, "bus_bw": bus_bw, "nwrong": 0.0}
    return {"size": 1048576, "count": count, "type": "float", "redop": redop, "root": root,
            "out_of_place": timing, "in_place": timing}  # fmt: skip


def test_a_json_report_is_read_by_its_binary_then_its_own_fields():
    reduce_scatter = one_result(32768, "sum", "    -1", 10.49, 9.18)  # one 8th per rank, busbw = 7/8 algbw
    assert collectives(parse_result_file(json_report(["./build/all_reduce_perf"], reduce_scatter), "r.json")) == {
        "all_reduce"
    }
    assert collectives(parse_result_file(json_report([], reduce_scatter), "slurm-9.json")) == {"reduce_scatter"}
    broadcast = one_result(262144, "none", "     0", 10.49, 10.49)
    assert collectives(parse_result_file(json_report([], broadcast), "slurm-9.json")) == {"broadcast"}
    with pytest.raises(ResultFileError, match="slurm-9.json: collective 'all_reduce' was given, but"):
        parse_result_file(json_report([], broadcast), "slurm-9.json", collective="all_reduce")


def cells(redop, root, count, algbw=10.0, busbw=10.0, size=1048576, type_name="float") -> Cells:
    return Cells(redop=redop, root=root, size=size, count=count, type_name=type_name, algbw=algbw, busbw=busbw)


@pytest.mark.parametrize(
    ("row", "fitting"),
    [
        # current nccl-tests: the redop and root every test passes to TimeTest, 8 ranks, 1 MiB of float
        (cells("sum", "-1", 262144, busbw=17.5), ("all_reduce",)),  # 2·7/8
        (cells("sum", "-1", 262144), ("all_reduce", "send_recv")),  # factor 1: 2 ranks, or sendrecv's op
        (cells("sum", "-1", 32768, busbw=8.75), ("reduce_scatter",)),
        (cells("sum", "0", 262144), ("reduce",)),
        (cells("none", "0", 262144), ("broadcast",)),
        (cells("none", "-1", 32768, busbw=8.75), ("all_gather", "all_to_all")),
        (cells("none", "-1", 262144), ("send_recv",)),
        (cells("none", "3", 32768), ()),  # gather, scatter
        # before NCCL 2.13: all_reduce without root, all_gather without either column, alltoall's blank redop
        (cells("sum", None, 262144, busbw=18.33), ("all_reduce",)),
        (cells(None, None, 32768, busbw=8.75), ("all_gather",)),
        (cells("", None, 32768, busbw=8.75), ("all_gather", "all_to_all")),
        # an unknown type leaves both kinds of count; the busbw factor still rules out the others
        (cells("sum", "-1", 262144, busbw=17.5, type_name="mystery"), ("all_reduce",)),
        (cells("sum", "-1", 262144, busbw=8.75, type_name="mystery"), ("reduce_scatter",)),
        # below 1 GB/s the two-decimal cells say nothing of the factor
        (cells("sum", "-1", 262144, algbw=0.01, busbw=0.02), ("all_reduce", "send_recv")),
    ],
)
def test_the_cells_each_nccl_tests_test_prints(row, fitting):
    assert collectives_fitting_cells(row) == fitting


def test_a_collectives_name_in_the_file_name_wins_over_p2p_which_names_the_transport():
    assert collective_from_file_name("05-rtx4090-pcie-1x8-p2p-disabled-allreduce.txt") == "all_reduce"
    assert collective_from_file_name("p2p-bandwidth.log") == "send_recv"
    assert collective_from_file_name("dp_allreduce_run3.csv") == "all_reduce"
    assert collective_from_file_name("results.txt") is None
