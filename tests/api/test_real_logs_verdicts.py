"""The labelled corpus of real nccl-tests logs (``../shared/fixtures/real-logs``), each imported through the API on
the built-in platform that describes its hardware and judged: every healthy log passes, every log its thread
diagnosed as broken is degraded or fails, and the one fault a single log cannot show (a slower protocol choice
over 0.6–1.0 MB, nccl#2441) is a regression against the run before it. docs/verdicts.md holds the table."""

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from emuplan.cli import app
from paths import REPO_ROOT
from real_logs import TABLE_HEADER, real_logs, table_row

LOGS = real_logs()


def imported(client: TestClient, log, **fields) -> dict:
    answer = client.post(
        "/api/runs", files={"file": (log.file, log.path.read_bytes())}, data={"platform": log.platform, **fields}
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def verdict_of(client: TestClient, run: dict) -> dict:
    return client.get(f"/api/runs/{run['id']}/stats").json()["verdict"]


@pytest.mark.parametrize("log", LOGS, ids=[log.file[:2] for log in LOGS])
def test_every_real_log_imports_with_its_rank_count_and_is_judged_as_its_source_says(client: TestClient, log) -> None:
    run = imported(client, log)
    assert run["ranks"] == log.ranks
    status = verdict_of(client, run)["status"]
    if log.label == "healthy":
        assert status == "pass"
    elif log.label == "problem" and not log.file.startswith("18"):
        assert status in ("degraded", "fail")


def test_the_a100_at_232_gbps_passes_at_97_percent_of_ncc_ls_ring(client: TestClient) -> None:
    log = next(log for log in LOGS if log.file.startswith("01"))
    stats = client.get(f"/api/runs/{imported(client, log)['id']}/stats").json()
    largest = max((g for g in stats["groups"] if g["variant"] == "out-of-place"), key=lambda g: g["size_bytes"])
    assert (largest["size_bytes"], largest["expected_algorithm"], largest["expected_protocol"]) == (
        4294967296,
        "ring",
        "Simple",
    )
    assert round(largest["expected_busbw_gbps"], 2) == 239.57  # 12 × NCCL's 20.0 GB/s per NVLink 3 link
    assert round(largest["pct_of_expected"], 1) == 97.0
    assert stats["verdict"]["status"] == "pass"


def test_an_h100_nvls_log_at_476_gbps_is_at_ncc_ls_nvls_figure_and_passes(client: TestClient) -> None:
    log = next(log for log in LOGS if log.file.startswith("02"))
    stats = client.get(f"/api/runs/{imported(client, log)['id']}/stats").json()
    largest = max((g for g in stats["groups"] if g["variant"] == "in-place"), key=lambda g: g["size_bytes"])
    assert (largest["expected_algorithm"], largest["expected_protocol"]) == ("nvls", "Simple")
    assert round(largest["expected_busbw_gbps"], 2) == 475.25
    assert round(largest["pct_of_expected"], 2) == 100.27
    assert stats["verdict"] == {**stats["verdict"], "status": "pass", "reasons": []}


def test_the_regressed_protocol_choice_of_nccl_2441_is_a_regression_against_the_good_run(
    client: TestClient, cli_env: str
) -> None:
    good = next(log for log in LOGS if log.file.startswith("19"))
    bad = next(log for log in LOGS if log.file.startswith("18"))
    imported(client, good)
    regressed = imported(client, bad)
    changed = client.get("/api/trend", params={"platform": "h100-nvl-pair"}).json()["what_changed"]
    assert (changed["run_id"], changed["quiet"]) == (regressed["id"], False)
    average = next(change for change in changed["changes"] if change["figure"] == "average_busbw_gbps")
    assert average["status"] == "regression"
    assert round(average["change_since_previous_pct"], 1) == -21.0  # 9.11 → 7.20 GB/s
    # /metrics says so for the series' newest run, and `emuplan trend` leads with it.
    scraped = {
        (sample.name, sample.labels.get("tag")): sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
        if sample.labels.get("platform") == "h100-nvl-pair"
    }
    assert scraped[("emuplan_series_regression", "")] == 1
    assert scraped[("emuplan_series_latest_run_id", "")] == regressed["id"]
    printed = CliRunner().invoke(app, ["trend", "--platform", "h100-nvl-pair"])
    assert printed.exit_code == 0, printed.output
    assert printed.output.splitlines()[:2] == [
        "h100-nvl-pair · all_reduce: 2 runs",
        "average busbw regression: -21.0 % from the median",
    ]


def test_with_a_plan_the_verdict_leads_with_what_a_step_costs_against_a_healthy_fabric(client: TestClient) -> None:
    """GPT-2 under DDP on 8 GPUs (a step all-reduces its 7 gradient buckets)
    on the P2P-disabled RTX 4090 box, and the step on NCCL's expectation of the same 8 PCIe GPUs."""
    plan = client.post("/api/plans", json={"model": "gpt2", "strategy": "data", "mode": "framework", "gpus": 8,
                                           "name": "GPT-2 DDP"})  # fmt: skip
    assert plan.status_code == 201, plan.text
    log = next(log for log in LOGS if log.file.startswith("05"))
    run = imported(client, log, plan_id=str(plan.json()["id"]))
    verdict = verdict_of(client, run)
    assert verdict["status"] == "degraded"
    first = verdict["reasons"][0]
    assert (first["code"], first["severity"]) == ("step-cost", "note")
    assert first["message"] == (
        "GPT-2 DDP: this fabric costs 29.45 ms of communication per step; a healthy pcie-gen4-200g would take "
        "18.76 ms (+56.9 %); 87 % of the loss is at 27 MiB–97.7 MiB, in 5 of the step's 7 collectives (bucket 6, "
        "bucket 1, bucket 2, …)"
    )
    assert [reason["code"] for reason in verdict["reasons"][1:]] == ["below-expected", "below-expected"]


def test_the_docs_table_is_what_the_corpus_reads_today(client: TestClient) -> None:
    rows = [table_row(log, client.get(f"/api/runs/{imported(client, log)['id']}/stats").json()) for log in LOGS]
    table = "\n".join([TABLE_HEADER, *rows])
    assert table in (REPO_ROOT / "docs" / "verdicts.md").read_text(), table


def test_a_series_is_ordered_by_when_each_run_was_measured_so_a_back_filled_log_lands_in_place(
    client: TestClient, cli_env: str
) -> None:
    """The good nccl#2441 build measured first, the regressed one after; imported the other way round, each says
    when it was measured (the upload's field, then the CLI and PATCH move it), and the series reads them in
    measurement order: the regressed run is the regression, not the good one an improvement."""
    good = next(log for log in LOGS if log.file.startswith("19"))
    bad = next(log for log in LOGS if log.file.startswith("18"))
    regressed = imported(client, bad, measured_at="2026-01-02T00:00:00+00:00")
    back_filled = imported(client, good)
    assert regressed["measured_at"] == "2026-01-02T00:00:00+00:00"
    edited = CliRunner().invoke(
        app, ["runs", "edit", str(back_filled["id"]), "--measured-at", "2026-01-01T00:00+00:00"]
    )
    assert edited.exit_code == 0, edited.output
    changed = client.get("/api/trend", params={"platform": "h100-nvl-pair"}).json()["what_changed"]
    assert (changed["run_id"], changed["previous_run_id"]) == (regressed["id"], back_filled["id"])
    average = next(change for change in changed["changes"] if change["figure"] == "average_busbw_gbps")
    assert average["status"] == "regression"
    # Moved after it through the API, the good run is the newest: an improvement.
    moved = client.patch(f"/api/runs/{back_filled['id']}", json={"measured_at": "2026-01-03T00:00:00Z"})
    assert moved.status_code == 200 and moved.json()["measured_at"] == "2026-01-03T00:00:00+00:00"
    changed = client.get("/api/trend", params={"platform": "h100-nvl-pair"}).json()["what_changed"]
    assert changed["run_id"] == back_filled["id"]
    assert next(c for c in changed["changes"] if c["figure"] == "average_busbw_gbps")["status"] == "improvement"
    # A time without its offset is refused rather than guessed, and nothing changes.
    naive = client.patch(f"/api/runs/{back_filled['id']}", json={"measured_at": "2026-01-04T00:00:00"})
    assert (naive.status_code, naive.json()["detail"]) == (
        422,
        "measured_at: 2026-01-04T00:00:00 has no UTC offset; add one (Z for UTC)",
    )
    assert client.get(f"/api/runs/{back_filled['id']}").json()["measured_at"] == "2026-01-03T00:00:00+00:00"
