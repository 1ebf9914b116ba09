"""The expected curve: NCCL's own cost model (``results.analysis.nccl_model``, ported from NVIDIA/nccl's src/tuning) on
the built-in platforms, against what NCCL itself says and what real systems measure (DESIGN.md §1.8):
8 B on 8 H100 in ~12.5 µs (NCCL's model: 15 µs), on 2×8 in 47.6 µs; DGX A100 ~230 GB/s busbw, 8×H100 with
NVLS ~476–480, GB300 NVL72 930 at 64 ranks."""

import pytest

from emuplan.results.analysis import nccl_model
from emuplan.results.analysis.expected import FabricError, expected_collective, fabric_of, pct_of_expected
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.platforms import BUILTIN_PLATFORMS, PlatformError, make_platform

GIB = 1 << 30
ALL_REDUCE = CollectiveOp.ALL_REDUCE


def expected(platform: str, op: CollectiveOp, size: int, ranks: int, hosts: int | None):
    return expected_collective(op, size, ranks, fabric_of(BUILTIN_PLATFORMS[platform], ranks, hosts))


def test_8_bytes_on_8_h100s_is_ncc_ls_ring_ll_15_us_within_2x_of_the_measured_12_5():
    small = expected("h100-ndr", ALL_REDUCE, 8, 8, 1)
    # baseLat ring/LL 6.6 µs + 2(n−1) = 14 NVLink hops of 0.6 µs (cost_model.cc).
    assert (small.algorithm, small.protocol, small.latency_us, round(small.time_us, 2)) == ("ring", "LL", 15.0, 15.0)
    assert 12.5 / 2 <= small.time_us <= 12.5 * 2


def test_8_bytes_on_2x8_h100s_is_ncc_ls_tree_ll_25_2_us_within_2x_of_the_measured_47_6():
    small = expected("h100-ndr", ALL_REDUCE, 8, 16, 2)
    # baseLat tree/LL 6.8 + 2 × (7 NVLink hops × 0.6 + log2(2) network hop × 5.0).
    assert (small.algorithm, small.protocol, round(small.latency_us, 6), round(small.time_us, 2)) == (
        "tree",
        "LL",
        25.2,
        25.2,
    )
    assert 47.6 / 2 <= small.time_us <= 47.6 * 2


def test_a_dgx_a100_expects_ncc_ls_ring_at_12_links_of_20_gb_s_not_the_300_gb_s_wire():
    large = expected("a100-hdr", ALL_REDUCE, 8 * GIB, 8, 1)
    assert (large.algorithm, large.protocol, large.bounding_level) == ("ring", "Simple", "NVLink 3")
    assert round(large.busbw_gbps, 2) == 239.79
    # The healthy DGX A100 of the corpus (232.44 GB/s) is 97 % of it; of the wire rate it was 77.5 %.
    assert round(pct_of_expected(232.44, large.busbw_gbps), 1) == 96.9


def test_8_h100s_expect_nvls_at_476_gb_s():
    large = expected("h100-ndr", ALL_REDUCE, 8 * GIB, 8, 1)
    # nvls.cc: 8 channels × 40 GB/s × nvlsEfficiency 0.85 × 7/8 × 2, less 25 µs of latency.
    assert (large.algorithm, large.protocol, round(large.busbw_gbps, 2)) == ("nvls", "Simple", 475.62)
    assert large.formula == (
        f"NCCL nvls/Simple over 8 ranks in one scale-up domain: 25.0 µs + S ÷ 272.0 GB/s algbw "
        f"({nccl_model.NCCL_SOURCE})"
    )


def test_two_and_eight_h100_nodes_expect_nvls_tree_and_then_the_ring_over_their_nics():
    two = expected("h100-ndr", ALL_REDUCE, 16 * GIB, 16, 2)
    assert (two.algorithm, round(two.busbw_gbps, 2), two.bounding_level) == (
        "nvls-tree",
        461.16,
        "InfiniBand NDR 400G",
    )
    eight = expected("h100-ndr", ALL_REDUCE, 8 * GIB, 64, 8)
    # 16 channels × 24 GB/s (8 NICs of 50 GB/s, the search's speed array) = 384, less the ring's latency.
    assert (eight.algorithm, eight.protocol, round(eight.busbw_gbps, 2)) == ("ring", "Simple", 376.99)


def test_a_gb300_rack_is_one_nccl_node_and_two_racks_are_two():
    rack = expected("gb300-nvl72", ALL_REDUCE, 16 * GIB, 64, None)
    assert (rack.algorithm, round(rack.busbw_gbps, 2)) == ("nvls", 931.76)
    racks = expected("gb300-nvl72", ALL_REDUCE, 16 * GIB, 128, None)
    assert (racks.algorithm, round(racks.busbw_gbps, 2)) == ("nvls-tree", 766.85)


def test_pcie_gpus_have_no_ll128_and_expect_the_ring_at_ncc_ls_pcie_rate():
    fabric = fabric_of(BUILTIN_PLATFORMS["pcie-gen4-200g"], 8, 1)
    protocols = {estimate.protocol for estimate in nccl_model.candidates(ALL_REDUCE, 128 << 20, fabric.topology)}
    assert protocols == {"LL", "Simple"}
    large = expected_collective(ALL_REDUCE, 128 << 20, 8, fabric)
    assert (large.algorithm, large.protocol, round(large.busbw_gbps, 2)) == ("ring", "Simple", 23.79)


def test_all_to_all_is_pairwise_send_recv_bound_by_the_slower_share():
    a2a = expected("h100-ndr", CollectiveOp.ALL_TO_ALL, GIB, 16, 2)
    assert (a2a.algorithm, a2a.bounding_level, round(a2a.latency_us, 1), round(a2a.busbw_gbps, 2)) == (
        "pairwise",
        "InfiniBand NDR 400G",
        40.5,
        93.4,
    )


def test_what_the_model_cannot_use_is_named():
    with pytest.raises(FabricError, match="ranks: a collective needs at least 2 ranks"):
        fabric_of(BUILTIN_PLATFORMS["h100-ndr"], 1, 1)
    with pytest.raises(FabricError, match="size_bytes: must be positive, got 0"):
        expected("h100-ndr", ALL_REDUCE, 0, 8, 1)
    with pytest.raises(PlatformError, match="nvls: NVLink SHARP needs Hopper or Blackwell GPUs on NVLink"):
        make_platform({**dict(BUILTIN_PLATFORMS["a100-hdr"]), "name": "a100-nvls", "nvls": True})


def test_a_profile_without_a_generation_takes_it_from_its_scale_up_rate():
    given = {**dict(BUILTIN_PLATFORMS["h100-ndr"]), "name": "mine"}
    del given["gpu_generation"], given["nvls"]
    platform = make_platform(given)
    assert (platform.gpu_generation, platform.scale_up_link, platform.nvls) == ("hopper", "nvlink", True)
