"""`emuplan platforms`: the profiles on the configured database, the same documents as /api/platforms."""

import json

import pytest
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.services import platforms as service
from emuplan.store.db import Database
from emuplan.workload.platforms import BUILTIN_PLATFORMS

pytestmark = pytest.mark.both_databases

# Wide enough for every line whole: tests/api/test_cli_fits.py reads the CLI at 80 columns.
runner = CliRunner(env={"COLUMNS": "1000"})


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_list_shows_the_builtins_figures_per_gpu(cli_env) -> None:
    listed = invoke("platforms", "list")
    assert listed.exit_code == 0
    assert listed.output.splitlines() == [
        "a100-hdr        built-in      0 runs  A100 SXM + HDR 200G: "
        "NVLink 3 300 GB/s in 8 GPUs; InfiniBand HDR 200G 8 × 200 Gbit/s per 8 GPUs = 25 GB/s per GPU",
        "h100-ndr        built-in      0 runs  H100 SXM + NDR 400G: "
        "NVLink 4 450 GB/s in 8 GPUs; InfiniBand NDR 400G 8 × 400 Gbit/s per 8 GPUs = 50 GB/s per GPU",
        "h200-ndr        built-in      0 runs  H200 SXM + NDR 400G: "
        "NVLink 4 450 GB/s in 8 GPUs; InfiniBand NDR 400G 8 × 400 Gbit/s per 8 GPUs = 50 GB/s per GPU",
        "b200-400g       built-in      0 runs  B200 + 400G: "
        "NVLink 5 900 GB/s in 8 GPUs; ConnectX-7 400G 8 × 400 Gbit/s per 8 GPUs = 50 GB/s per GPU",
        "b200-800g       built-in      0 runs  B200 + 800G: "
        "NVLink 5 900 GB/s in 8 GPUs; ConnectX-8 800G 8 × 800 Gbit/s per 8 GPUs = 100 GB/s per GPU",
        "gb200-nvl72     built-in      0 runs  GB200 NVL72 + 400G: "
        "NVLink 5 (NVL72) 900 GB/s in 72 GPUs; ConnectX-7 400G 4 × 400 Gbit/s per 4 GPUs = 50 GB/s per GPU",
        "h100-a3-mega    built-in      0 runs  H100 SXM + 8 × 200G TCPXO (GCP A3 Mega): "
        "NVLink 4 450 GB/s in 8 GPUs; GPUDirect-TCPXO 200G 8 × 200 Gbit/s per 8 GPUs = 25 GB/s per GPU",
        "b300-roce       built-in      0 runs  B300 SXM + 16 × 400G RoCE (OCI BM.GPU.B300.8): "
        "NVLink 5 900 GB/s in 8 GPUs; RoCEv2 400G 16 × 400 Gbit/s per 8 GPUs = 100 GB/s per GPU",
        "gb300-nvl72     built-in      0 runs  GB300 NVL72 + 800G: "
        "NVLink 5 (NVL72) 900 GB/s in 72 GPUs; ConnectX-8 800G 4 × 800 Gbit/s per 4 GPUs = 100 GB/s per GPU",
        "h100-nvl-pair   built-in      0 runs  H100 NVL pairs + 200G: "
        "NVLink 4 bridge 300 GB/s in 2 GPUs; Slingshot-200 / 200G 2 × 200 Gbit/s per 2 GPUs = 25 GB/s per GPU",
        "pcie-gen4-200g  built-in      0 runs  PCIe Gen4 GPUs + 200G: "
        "PCIe Gen4 x16 24 GB/s in 8 GPUs; 200G (HDR InfiniBand or 200GbE) 1 × 200 Gbit/s per 8 GPUs = 3.125 GB/s "
        "per GPU",
        "gb10-200g       built-in      0 runs  GB10 (DGX Spark) + 200GbE: "
        "NVLink-C2C (one GPU) 300 GB/s in 1 GPUs; ConnectX-7 200GbE 1 × 200 Gbit/s per 1 GPUs = 25 GB/s per GPU",
    ]
    documents = json.loads(invoke("platforms", "list", "--json").output)
    assert documents[1] == {
        **BUILTIN_PLATFORMS["h100-ndr"].model_dump(mode="json"), "builtin": True, "runs": 0, "plans": 0,
    }  # fmt: skip


def test_show_gives_the_sources_and_the_level_a_collective_is_bounded_by(cli_env) -> None:
    shown = invoke("platforms", "show", "h100-ndr", "--ranks", "16", "--ranks-per-node", "8")
    assert shown.exit_code == 0
    lines = shown.output.splitlines()
    assert lines[:6] == [
        "H100 SXM + NDR 400G (h100-ndr, built-in)",
        "  GPU: NVIDIA H100 SXM5, 8 per node",
        "  NVLink 4 450 GB/s in 8 GPUs; InfiniBand NDR 400G 8 × 400 Gbit/s per 8 GPUs = 50 GB/s per GPU "
        "(per direction)",
        "  NCCL's model: hopper GPUs over NVLink, NVLink SHARP",
        "  verdict: degraded below 80 %, fails below 50 % of expected where bandwidth dominates",
        "  named by 0 runs and 0 plans",
    ]
    assert lines[6:10] == [f"  [{n}] {source}" for n, source in enumerate(BUILTIN_PLATFORMS["h100-ndr"].sources, 1)]
    assert lines[10:] == [
        "  16 ranks span 2 nodes in 2 scale-up domains: bounded by InfiniBand NDR 400G (scale-out), 50 GB/s per GPU "
        "per direction"
    ]
    in_one_rack = json.loads(
        invoke("platforms", "show", "gb200-nvl72", "--ranks", "72", "--ranks-per-node", "4", "--json").output
    )
    assert in_one_rack["ceiling"] == {
        "level": "scale-up", "fabric": "NVLink 5 (NVL72)", "gb_s": 900.0, "nodes": 18, "domains": 1,
    }  # fmt: skip


def test_add_from_a_builtin_edit_rename_and_remove(cli_env, database: Database) -> None:
    added = invoke(
        "platforms", "add", "h100-roce", "--from", "h100-ndr", "--title", "H100 + RoCE 200G",
        "--scale-out-fabric", "RoCE 200G", "--nic-gbit-s", "200", "--source", "our acceptance test",
    )  # fmt: skip
    assert (added.exit_code, added.output) == (
        0,
        "platform h100-roce added: NVLink 4 450 GB/s in 8 GPUs; RoCE 200G 8 × 200 Gbit/s per 8 GPUs = 25 GB/s "
        "per GPU\n",
    )
    with database.read_session() as session:
        entry = service.get_platform(session, "h100-roce")
    assert dict(entry.platform) == {
        **dict(BUILTIN_PLATFORMS["h100-ndr"]), "name": "h100-roce", "title": "H100 + RoCE 200G",
        "scale_out_fabric": "RoCE 200G", "nic_gbit_s": 200, "sources": ["our acceptance test"],
    }  # fmt: skip

    edited = invoke("platforms", "edit", "h100-roce", "--name", "roce-200g", "--fail-below-pct", "60")
    assert edited.exit_code == 0, edited.output
    assert edited.output.startswith("platform roce-200g saved: ")
    with database.read_session() as session:
        entry = service.get_platform(session, "roce-200g")
    assert (entry.platform.fail_below_pct, entry.platform.nic_gbit_s, entry.platform.sources) == (
        60, 200, ["our acceptance test"],
    )  # fmt: skip

    removed = invoke("platforms", "remove", "roce-200g")
    assert removed.output == "Platform roce-200g deleted; 0 runs and 0 plans that named it now have no platform.\n"
    assert "roce-200g" not in invoke("platforms", "list").output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["edit", "h100-ndr", "--title", "mine"], "error: h100-ndr: a built-in platform cannot be edited; add one of "
         "your own under another name (its figures copied and changed) instead"),
        (["remove", "gb200-nvl72"], "error: gb200-nvl72: a built-in platform cannot be deleted; add one of your own "
         "under another name (its figures copied and changed) instead"),
        (["add", "h100-ndr", "--from", "h100-ndr"], "error: name: 'h100-ndr' is a built-in platform; choose another "
         "name"),
        (["add", "mine", "--from", "h100-ndr", "--scale-up-domain-gpus", "12"], "error: scale_up_domain_gpus: a "
         "scale-up domain is whole nodes; 12 GPUs is not a multiple of 8 GPUs per node"),
        (["add", "mine", "--title", "Mine", "--gpu-model", "X", "--gpus-per-node", "8"], "error: scale_up_domain_gpus: "
         "Field required; scale_up_fabric: Field required; scale_up_gb_s: Field required; scale_out_fabric: Field "
         "required; nics_per_node: Field required; nic_gbit_s: Field required"),
        (["show", "nvl576"], "error: no platform named 'nvl576': `emuplan platforms list` shows them"),
        (["show", "h100-ndr", "--ranks", "16", "--ranks-per-node", "9"], "error: ranks_per_node: 9 must be between 1 "
         "and the 8 GPUs per node of h100-ndr"),
    ],
)  # fmt: skip
def test_refusals_exit_2_with_the_message(cli_env, args: list[str], message: str) -> None:
    refused = invoke("platforms", *args)
    assert (refused.exit_code, refused.output) == (2, message + "\n")
    assert len(json.loads(invoke("platforms", "list", "--json").output)) == len(BUILTIN_PLATFORMS)
