"""``emuplan simulate`` through the real Typer app, the shared ASTRA-sim build and a migrated database."""

import json

import pytest
from typer.testing import CliRunner

from astra_sim_binary import requires_astra_sim
from emuplan.cli import app
from emuplan.services.plans import create_plan
from emuplan.store.db import Database
from emuplan.workload.document import PlanRequest
from paths import ASTRA_SIM

runner = CliRunner()


def saved_plan(database_url: str, **request) -> int:
    database = Database(database_url)
    with database.writing() as session:
        plan_id = create_plan(session, PlanRequest(model="fashion-mnist-mlp", **{"mode": "framework", **request})).id
    database.dispose()
    return plan_id


@requires_astra_sim
def test_simulate_prints_each_ranks_step_beside_the_planned_communication(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMUPLAN_ASTRA_SIM", str(ASTRA_SIM))
    plan_id = saved_plan(cli_env, strategy="hybrid", tp=2, pp=2, dp=2, gpus_per_host=4, hosts=2)
    result = runner.invoke(app, ["simulate", str(plan_id)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"plan {plan_id}: 4 × 2 NPUs as rings, links 12.5 GB/s and 5000 ns; compute at 40% of NVIDIA H100 SXM's "
        "bf16 peak",
        "ranks             count    step (µs)  compute (µs)  exposed comm (µs)",
        "0-1, 4-5              4        635.9          13.0              622.9",
        "2-3, 6-7              4        585.6          13.0              572.6",
        "simulated step (slowest rank): 635.9 µs",
        "planned communication per step (ideal, one after another): tp 187.8 µs (2 collectives), pp 355.5 µs "
        "(4 collectives), dp 47.4 µs (1 collective)",
    ]
    assert result.stderr.splitlines()[:4] == [
        f"simulating plan {plan_id}'s 8 ranks with {ASTRA_SIM.name} ...",
        "  writing 8 traces",
        f"  traces written; {ASTRA_SIM.name} running",
        "  0/8 ranks finished",
    ]
    assert result.stderr.splitlines()[-1] == "  8/8 ranks finished"

    as_json = runner.invoke(app, ["simulate", str(plan_id), "--json", "--utilisation", "0.2", "--gpu", "a100"])
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    assert (document["gpu"], document["utilisation"], document["step_ns"]) == ("a100", 0.2, 653_901)
    # At 20% of an A100 stage 0's first layer (784 → 256) leaves the 1 µs floor: 49 µs of compute instead of 13.
    assert [(g["ranks"], g["compute_ns"]) for g in document["rank_groups"]] == [
        ("0-1, 4-5", 49_000), ("2-3, 6-7", 13_000)
    ]  # fmt: skip


def test_simulate_without_the_setting_says_how_to_install_it(cli_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMUPLAN_ASTRA_SIM", raising=False)
    plan_id = saved_plan(cli_env, strategy="data")
    result = runner.invoke(app, ["simulate", str(plan_id)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ASTRA-sim is not set up on this machine: set EMUPLAN_ASTRA_SIM")


@requires_astra_sim
def test_simulate_refuses_what_has_no_trace(cli_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMUPLAN_ASTRA_SIM", str(ASTRA_SIM))
    tutorial = saved_plan(cli_env, strategy="data", mode="tutorial")
    result = runner.invoke(app, ["simulate", str(tutorial)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: mode: a Chakra trace follows the framework's schedule")
    missing = runner.invoke(app, ["simulate", "999"])
    assert (missing.exit_code, missing.stderr) == (2, "error: no plan with id 999\n")
