"""``emuplan plan`` through the real Typer app: seed numbers, table output, --save, --help."""

import json
from pathlib import Path

from sqlmodel import select
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.store.db import Database
from emuplan.store.models import Plan

runner = CliRunner()
LLAMA_2_7B_PATH = Path(__file__).parents[1] / "fixtures" / "hf_configs" / "Llama-2-7b-hf" / "config.json"


def run(*args: str):
    return runner.invoke(app, ["plan", *args])


def test_seed_strategies_as_json() -> None:
    for strategy, extra, sizes in (
        ("data", [], [971048]),
        ("tensor", ["--gpus", "4"], [6438912]),
        ("pipeline", [], [2600, 33024, 131584, 803840]),
    ):
        result = run("--model", "fashion-mnist-mlp", "--strategy", strategy, *extra, "--json")
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert (document["trials"], document["kccb"]["data_sizes"]) == (8, sizes)


def test_readable_table_and_kccb_settings() -> None:
    result = run("--model", "fashion-mnist-mlp", "--strategy", "pipeline")
    assert result.exit_code == 0
    assert "fc4 gradient  all_reduce        2,600" in result.stdout
    assert "data sizes   [2600, 33024, 131584, 803840]" in result.stdout
    assert "ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING (10)" in result.stdout


def test_llama_3_70b_hybrid_framework() -> None:
    result = run("--model", "llama-3-70b", "--strategy", "hybrid", "--tp", "8", "--pp", "8", "--dp", "16",
                 "--seq-len", "8192", "--micro-batch", "1", "--mode", "framework", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["kccb_trials"] == 3
    assert document["model"]["parameter_count"] == 70_553_706_496


def test_config_json_with_bucket_cap() -> None:
    result = run(
        "--model", str(LLAMA_2_7B_PATH), "--strategy", "data", "--mode", "framework", "--bucket-cap-mb", "25", "--json"
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["model"]["source_kind"] == "hf_config"
    assert sum(c["bytes_total"] for c in document["collectives"] if c["op"] == "all_reduce") == 6_738_415_616 * 2
    # DDP broadcasts the rotary embedding's two float32 buffers of head_dim / 2 = 64 values before each forward.
    assert [(c["op"], c["bytes_total"]) for c in document["collectives"] if c["op"] != "all_reduce"] == [
        ("broadcast", 512)
    ]


def test_save_stores_the_plan_and_reports_its_id(cli_env: str) -> None:
    result = run("--model", "fashion-mnist-mlp", "--strategy", "data", "--save", "--json")
    assert result.exit_code == 0, result.output
    plan_id = json.loads(result.stdout)["id"]
    database = Database(cli_env)
    with database.read_session() as session:
        plans = session.exec(select(Plan)).all()
    database.dispose()
    assert [(p.id, p.trials, p.workload["kccb"]["data_sizes"]) for p in plans] == [(plan_id, 8, [971048])]


def test_export_prints_the_paste_ready_list() -> None:
    result = run("--model", "fashion-mnist-mlp", "--strategy", "tensor", "--export", "text")
    assert result.stdout == "# trial 1: ALGO_ALL_GATHER_RING (20), iterations 8, 4 hosts x 1 GPUs\n6438912\n"


def test_errors_exit_2_with_the_field() -> None:
    result = run("--model", "fashion-mnist-mlp", "--batch-size", "0")
    assert result.exit_code == 2
    assert "batch_size: must be at least 1, got 0" in result.stderr
    result = run("--model", "nope")
    assert result.exit_code == 2
    assert "model: unknown model 'nope'" in result.stderr


def test_help_documents_every_option() -> None:
    result = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert result.exit_code == 0
    for option in ("--model", "--strategy", "--mode", "--dp-impl", "--dataset-size", "--batch-size", "--epochs",
                   "--drop-last", "--gpus", "--hosts", "--gpus-per-host", "--tp", "--pp", "--dp", "--stages",
                   "--micro-batch", "--micro-batches", "--seq-len", "--sequence-parallel", "--bucket-cap-mb",
                   "--param-dtype", "--grad-dtype", "--activation-dtype", "--link-gbps", "--latency-us", "--json",
                   "--save", "--export"):  # fmt: skip
        assert option in result.stdout, option
    assert "[default: 100.0]" in result.stdout  # --link-gbps
    assert "25 MiB after a 1 MiB first bucket" in result.stdout
