"""Platform profiles: the built-ins' cited figures per GPU per direction, and the level a collective's ranks are
bounded by."""

import pytest

from emuplan.workload.platforms import BUILTIN_PLATFORMS, Ceiling, PlatformError, ceiling_gbps, make_platform

H100, GB200 = BUILTIN_PLATFORMS["h100-ndr"], BUILTIN_PLATFORMS["gb200-nvl72"]


def test_the_builtins_carry_the_datasheets_figures_per_gpu_per_direction() -> None:
    figures = {
        name: (
            p.gpus_per_node,
            p.scale_up_domain_gpus,
            p.scale_up_gb_s,
            p.nics_per_node,
            p.nic_gbit_s,
            p.scale_out_gb_s,
        )
        for name, p in BUILTIN_PLATFORMS.items()
    }
    assert figures == {
        "a100-hdr": (8, 8, 300, 8, 200, 25),
        "h100-ndr": (8, 8, 450, 8, 400, 50),
        "h200-ndr": (8, 8, 450, 8, 400, 50),
        "b200-400g": (8, 8, 900, 8, 400, 50),
        "b200-800g": (8, 8, 900, 8, 800, 100),
        "gb200-nvl72": (4, 72, 900, 4, 400, 50),
        "h100-a3-mega": (8, 8, 450, 8, 200, 25),
        "b300-roce": (8, 8, 900, 16, 400, 100),
        "gb300-nvl72": (4, 72, 900, 4, 800, 100),
        "h100-nvl-pair": (2, 2, 300, 2, 200, 25),
        "pcie-gen4-200g": (8, 8, 24, 1, 200, 3.125),
        "gb10-200g": (1, 1, 300, 1, 200, 25),
    }
    assert {name: (p.gpu_generation, p.scale_up_link, p.nvls) for name, p in BUILTIN_PLATFORMS.items()} == {
        "a100-hdr": ("ampere", "nvlink", False),
        "h100-ndr": ("hopper", "nvlink", True),
        "h200-ndr": ("hopper", "nvlink", True),
        "b200-400g": ("blackwell", "nvlink", True),
        "b200-800g": ("blackwell", "nvlink", True),
        "gb200-nvl72": ("blackwell", "nvlink", True),
        "h100-a3-mega": ("hopper", "nvlink", True),
        "b300-roce": ("blackwell", "nvlink", True),
        "gb300-nvl72": ("blackwell", "nvlink", True),
        "h100-nvl-pair": ("hopper", "nvlink", False),  # NVLink bridges in pairs, no NVSwitch
        "pcie-gen4-200g": ("ampere", "pcie", False),
        "gb10-200g": ("blackwell", "nvlink", False),
    }
    assert {(p.degraded_below_pct, p.fail_below_pct) for p in BUILTIN_PLATFORMS.values()} == {(80, 50)}
    # Every built-in names where its figures come from, and NCCL's model for what it expects of them.
    for platform in BUILTIN_PLATFORMS.values():
        assert any("https://" in s or "quick-start" in s or "NCCL counts" in s for s in platform.sources)
        assert any(s.startswith("NCCL cost model (github.com/NVIDIA/nccl @ 1fc949c") for s in platform.sources)


def test_an_h100_run_over_two_nodes_is_bounded_by_ndr_and_one_node_by_nvlink() -> None:
    assert ceiling_gbps(H100, 16, 8) == Ceiling(
        level="scale-out", fabric="InfiniBand NDR 400G", gb_s=50, nodes=2, domains=2
    )
    assert ceiling_gbps(H100, 8, 8) == Ceiling(level="scale-up", fabric="NVLink 4", gb_s=450, nodes=1, domains=1)
    # Default: full nodes. Four ranks on each of four nodes still cross the NICs.
    assert ceiling_gbps(H100, 16) == ceiling_gbps(H100, 16, 8)
    assert ceiling_gbps(H100, 16, 4).model_dump() == {
        "level": "scale-out", "fabric": "InfiniBand NDR 400G", "gb_s": 50, "nodes": 4, "domains": 4,
    }  # fmt: skip


def test_72_gb200_ranks_stay_in_one_nvlink_domain_and_144_cross_to_the_nics() -> None:
    # 72 GPUs over 18 trays of 4: one NVLink domain, NVLink 5's 900 GB/s.
    assert ceiling_gbps(GB200, 72, 4) == Ceiling(
        level="scale-up", fabric="NVLink 5 (NVL72)", gb_s=900, nodes=18, domains=1
    )
    # Two racks: 4 NICs × 400 Gbit/s ÷ 4 GPUs a tray = 50 GB/s per GPU.
    assert ceiling_gbps(GB200, 144, 4) == Ceiling(
        level="scale-out", fabric="ConnectX-7 400G", gb_s=50, nodes=36, domains=2
    )
    # 36 trays with one rank each: 18 a rack, still two racks.
    assert ceiling_gbps(GB200, 36, 1).domains == 2


def test_the_slowest_level_bounds_when_the_scale_out_is_faster_than_nvlink() -> None:
    odd = make_platform({**dict(H100), "name": "slow-nvlink", "scale_up_gb_s": 40})
    # Two ranks a node share its slow NVLink: that bounds them, not the NICs.
    assert ceiling_gbps(odd, 16, 2).fabric == "NVLink 4"
    # One rank a node shares no domain with another: only the NICs are spanned.
    assert ceiling_gbps(odd, 2, 1).fabric == "InfiniBand NDR 400G"


@pytest.mark.parametrize(
    ("ranks", "ranks_per_node", "message"),
    [
        (0, 8, "ranks: 0 must be 1 or more"),
        (16, 9, "ranks_per_node: 9 must be between 1 and the 8 GPUs per node of h100-ndr"),
        (16, 0, "ranks_per_node: 0 must be between 1 and the 8 GPUs per node of h100-ndr"),
    ],
)
def test_ranks_that_cannot_run_on_the_platform_are_refused(ranks: int, ranks_per_node: int, message: str) -> None:
    with pytest.raises(PlatformError) as refused:
        ceiling_gbps(H100, ranks, ranks_per_node)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "H100 mine"}, "name: 'H100 mine' must be 1 to 64 lowercase letters, digits and hyphens, starting "
         "with a letter or digit"),
        ({"scale_up_domain_gpus": 12}, "scale_up_domain_gpus: a scale-up domain is whole nodes; 12 GPUs is not a "
         "multiple of 8 GPUs per node"),
        ({"fail_below_pct": 85}, "fail_below_pct: 85 % must be below degraded_below_pct (80 %)"),
        ({"nic_gbit_s": 0, "gpus_per_node": "eight"}, "gpus_per_node: Input should be a valid integer, unable to "
         "parse string as an integer; nic_gbit_s: Input should be greater than 0"),
        ({"bandwidth": 1}, "bandwidth: Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_figures_that_cannot_describe_hardware_are_refused_naming_the_field(change: dict, message: str) -> None:
    with pytest.raises(PlatformError) as refused:
        make_platform({**dict(H100), "name": "mine", **change})
    assert str(refused.value) == message
