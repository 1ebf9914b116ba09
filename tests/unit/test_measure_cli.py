"""``emuplan measure`` through the real Typer app, real gloo processes and a real migrated database."""

import gzip
import json
import socket
from pathlib import Path

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.measure.launcher import run_local_measurement
from emuplan.measure.options import MeasurementOptions
from emuplan.services.plans import create_plan
from emuplan.store.db import Database
from emuplan.store.tables import Run, RunTable
from emuplan.workload.document import PlanRequest
from scheduling import EXPECTED_REALTIME_POLICY

runner = CliRunner()


@pytest.fixture
def seed_plan_id(cli_env: str) -> int:
    """The seed tutorial's data-parallel plan, stored: one 971048-byte all-reduce, 8 trials, 4 hosts × 1 GPU."""
    database = Database(cli_env)
    with database.writing() as session:
        plan_id = create_plan(session, PlanRequest(model="fashion-mnist-mlp", strategy="data")).id
    database.dispose()
    return plan_id


def stored_runs(database_url: str) -> list[Run]:
    database = Database(database_url)
    with database.read_session() as session:
        runs = list(session.exec(select(Run)))
    database.dispose()
    return runs


def test_measure_stores_a_measured_run_linked_to_the_plan(cli_env: str, seed_plan_id: int) -> None:
    result = runner.invoke(
        app,
        [
            "measure",
            str(seed_plan_id),
            "--world-size",
            "2",
            "--backend",
            "gloo",
            "--iterations",
            "3",
            "--warmup",
            "1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)
    assert (run["origin"], run["plan_id"], run["strategy"], run["ranks"], run["hosts"]) == (
        "measured",
        seed_plan_id,
        "data",
        2,
        1,
    )
    assert run["origin_detail"] == (
        f"measured locally (gloo, world size 2, host {socket.gethostname()}, "
        f"timed at {EXPECTED_REALTIME_POLICY}); "
        "3 iterations after 1 warm-up iteration (excluded)"
    )
    assert run["source_format"] == "per-iteration"
    assert run["sample_count"] == 3
    [group] = run["summary"]["groups"]
    assert (group["collective"], group["size_bytes"], group["count"]) == ("all_reduce", 971048, 3)
    # % of ideal against the plan's α-β estimate for 2 ranks at the plan's 100 Gbit/s, 5 µs.
    ideal_us = (2 * 1 * 5e-6 + 2 * 1 / 2 * 971048 / (100e9 / 8)) * 1e6
    assert group["ideal_time_us"] == pytest.approx(ideal_us)
    assert group["pct_of_ideal"] == pytest.approx(ideal_us / group["mean_us"] * 100)
    assert "iteration 2/4" in result.stderr and "(warm-up)" in result.stderr

    database = Database(cli_env)
    with database.read_session() as session:
        table = session.get(RunTable, (run["id"], "samples"))
        assert table.row_count == 3
    database.dispose()


def test_failed_measurement_exits_2_and_stores_nothing(cli_env: str, seed_plan_id: int) -> None:
    # Killed by its timeout before the workers are even up: nothing may be stored.
    result = runner.invoke(app, ["measure", str(seed_plan_id), "--world-size", "2", "--timeout", "0.5"])
    assert result.exit_code == 2
    assert "error: measurement timed out after 0.5 s" in result.stderr
    assert stored_runs(cli_env) == []


def test_unknown_plan_and_bad_options_are_refused(cli_env: str, seed_plan_id: int) -> None:
    result = runner.invoke(app, ["measure", "999"])
    assert (result.exit_code, result.stderr.strip()) == (2, "error: no plan with id 999")
    result = runner.invoke(app, ["measure", str(seed_plan_id), "--backend", "mpi"])
    assert (result.exit_code, result.stderr.strip()) == (2, "error: --backend: 'mpi' is not one of gloo, nccl, auto")
    result = runner.invoke(app, ["measure", str(seed_plan_id), "--iterations", "0"])
    assert (result.exit_code, result.stderr.strip()) == (2, "error: iterations must be between 1 and 100000, got 0")
    assert stored_runs(cli_env) == []


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--iterations", "100001"], "iterations must be between 1 and 100000, got 100001"),
        (["--warmup", "10001"], "warm-up iterations must be between 0 and 10000, got 10001"),
        (["--timeout", "3601"], "timeout must be positive and at most 3600 s, got 3601 s"),
    ],
)  # fmt: skip
def test_a_measurement_past_its_bounds_exits_2_before_any_process_starts(
    cli_env: str, seed_plan_id: int, option: list[str], message: str
) -> None:
    result = runner.invoke(app, ["measure", str(seed_plan_id), "--world-size", "2", *option])
    assert (result.exit_code, result.stderr.strip()) == (2, f"error: {message}")
    assert stored_runs(cli_env) == []


def test_torchrun_prints_the_cluster_command_and_writes_the_plan(
    cli_env: str, seed_plan_id: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["measure", str(seed_plan_id), "--torchrun", "--warmup", "3"])
    assert result.exit_code == 0, result.output
    plan_file = f"plan-{seed_plan_id}.json"
    assert (
        f"torchrun --nnodes=4 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=HEAD_NODE:29500 "
        f"--rdzv-id=emuplan-plan-{seed_plan_id} -m emuplan.measure --plan {plan_file} "
        f"--output plan-{seed_plan_id}-measured.csv --warmup 3 --workload kccb --backend auto --timeout-s 600 "
        "--scheduling realtime"
    ) in result.stdout
    assert f"emuplan measure {seed_plan_id} --from-file plan-{seed_plan_id}-measured.csv" in result.stdout
    assert json.loads((tmp_path / plan_file).read_text())["kccb"]["data_sizes"] == [971048]
    assert stored_runs(cli_env) == []


def test_from_file_stores_a_torchrun_result_as_measured(cli_env: str, seed_plan_id: int, tmp_path: Path) -> None:
    plan_document = {"trials": 2, "kccb": {"collective": "all_reduce", "data_sizes": [971048]}}
    result = run_local_measurement(plan_document, MeasurementOptions(world_size=2, backend="gloo", warmup=0))
    (tmp_path / "out.csv").write_text(result.csv_text)
    (tmp_path / "out.json").write_text(json.dumps(result.record))

    stored = runner.invoke(app, ["measure", str(seed_plan_id), "--from-file", str(tmp_path / "out.csv"), "--json"])
    assert stored.exit_code == 0, stored.output
    run = json.loads(stored.stdout)
    assert run["origin_detail"] == (
        f"measured with torchrun (gloo, world size 2, host {socket.gethostname()}, "
        f"timed at {EXPECTED_REALTIME_POLICY}); "
        "2 iterations after 0 warm-up iterations (excluded)"
    )
    assert (run["file_name"], run["sample_count"], run["plan_id"]) == ("out.csv", 2, seed_plan_id)
    # The record's per-rank timestamps become the run's straggler view: 2 ranks, 2 calls, on this host.
    stragglers = run["summary"]["stragglers"]
    assert (stragglers["rank_count"], stragglers["host_count"], stragglers["calls"]) == (2, 1, 2)
    assert stragglers["slowest_rank"]["host"] == socket.gethostname()

    # The worker's CSV is a per-iteration file `emuplan import` reads (here gzipped: other bytes, same rows).
    (tmp_path / "out.csv.gz").write_bytes(gzip.compress(result.csv_text.encode()))
    imported = runner.invoke(app, ["import", str(tmp_path / "out.csv.gz"), "--plan", str(seed_plan_id), "--json"])
    assert imported.exit_code == 0, imported.output
    assert (json.loads(imported.stdout)["source_format"], json.loads(imported.stdout)["sample_count"]) == (
        "per-iteration",
        2,
    )
    again = runner.invoke(app, ["measure", str(seed_plan_id), "--from-file", str(tmp_path / "out.csv")])
    assert again.exit_code == 2
    assert f"out.csv: identical content was already imported as run {run['id']}" in again.stderr

    (tmp_path / "out.json").unlink()
    missing = runner.invoke(app, ["measure", str(seed_plan_id), "--from-file", str(tmp_path / "out.csv")])
    assert missing.exit_code == 2
    assert "--from-file needs the CSV and the .json record rank 0 wrote beside it" in missing.stderr


def test_from_file_refuses_a_record_with_a_wrong_field_and_stores_nothing(
    cli_env: str, seed_plan_id: int, tmp_path: Path
) -> None:
    plan_document = {"trials": 2, "kccb": {"collective": "all_reduce", "data_sizes": [971048]}}
    result = run_local_measurement(plan_document, MeasurementOptions(world_size=2, backend="gloo", warmup=0))
    (tmp_path / "out.csv").write_text(result.csv_text)
    for field, value, message in [
        ("world_size", 0, "out.csv record: field world_size: Input should be greater than or equal to 1"),
        ("format", "emuplan-measurement/0", "out.csv record: field format: Input should be 'emuplan-measurement/1'"),
        ("hosts", None, "out.csv record: field hosts: Input should be a valid list"),
        ("scheduling", ..., "out.csv record: field scheduling: Field required"),
        ("rank_end_ns", [], "out.csv record: field rank_end_ns: shaped (0,), expected [rank][iteration][call] "
         "integer lists for 2 ranks × 2 iterations"),
    ]:  # fmt: skip
        record = {key: item for key, item in result.record.items() if key != field}
        if value is not ...:
            record[field] = value
        (tmp_path / "out.json").write_text(json.dumps(record))
        refused = runner.invoke(app, ["measure", str(seed_plan_id), "--from-file", str(tmp_path / "out.csv")])
        assert (refused.exit_code, refused.stderr.strip()) == (2, f"error: {message}")
    assert stored_runs(cli_env) == []
