"""``emuplan plan`` through the real Typer app: seed numbers, table output, --save, --help."""

import json

from sqlmodel import select
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.store.db import Database
from emuplan.store.tables import Plan
from emuplan.workload.document import PlanRequest
from paths import LLAMA_2_7B_CONFIG

# Wide enough for every line whole: tests/api/test_cli_fits.py reads the CLI at 80 columns.
runner = CliRunner(env={"COLUMNS": "1000"})


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
        "--model",
        str(LLAMA_2_7B_CONFIG),
        "--strategy",
        "data",
        "--mode",
        "framework",
        "--bucket-cap-mb",
        "25",
        "--json",
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
    assert result.stdout == "# trial 1: ALGO_ALL_GATHER_RING (20), iterations 8, 4 hosts x 1 GPU per host\n6438912\n"


def test_errors_exit_2_naming_the_option() -> None:
    result = run("--model", "fashion-mnist-mlp", "--batch-size", "0")
    assert result.exit_code == 2
    assert result.stderr == "error: --batch-size: must be at least 1, got 0\n"
    result = run("--model", "fashion-mnist-mlp", "--epochs", str(2**60))  # 2^63 trials would overflow the database
    assert (result.exit_code, result.stderr) == (2, "error: --epochs: Input should be less than or equal to 1048576\n")
    result = run("--model", "nope")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --model: unknown model 'nope'")
    result = run("--model", "fashion-mnist-mlp", "--strategy", "tensor", "--tp", "1")
    assert result.stderr == "error: --tp: the tensor strategy needs a tensor-parallel degree of at least 2, got 1\n"


def test_help_groups_every_option_into_the_plan_pages_panels_and_fits_80_columns() -> None:
    result = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in result.stdout  # nothing cut short
    panels = [line.split(" ")[1] for line in lines if line.startswith("╭─ ")]
    assert panels == ["Options", "Model", "Data", "Layout", "Parallelism", "Network", "Advanced", "Output"]
    panel_of = {}
    for line in lines:
        if line.startswith("╭─ "):
            panel = line.split(" ")[1]
        elif line.startswith("│ --"):
            panel_of[line[2:].split()[0].split(",")[0]] = panel
    # Every field of the planner's request is an option, in the panel its page fieldset has.
    for field in PlanRequest.model_fields:
        flag = "--" + field.replace("_", "-")
        if field == "vocab_parallel_loss":
            flag = "--no-vocab-parallel-loss"
        assert panel_of[flag] == PlanRequest.option_group(field).value, flag
    assert "[default: 100.0]" in result.stdout  # --link-gbps
    assert "--pp,--stages" in result.stdout


def test_the_saved_request_is_what_the_command_line_gave(cli_env: str) -> None:
    result = run("--model", "fashion-mnist-mlp", "--strategy", "tensor", "--stages", "1", "--link-gbps", "400",
                 "--no-vocab-parallel-loss", "--save", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["network"] == {"link_gbps": 400.0, "latency_us": 5.0}
    database = Database(cli_env)
    with database.read_session() as session:
        (plan,) = session.exec(select(Plan)).all()
    database.dispose()
    assert plan.request == {
        "model": "fashion-mnist-mlp",
        "strategy": "tensor",
        "pp": 1,
        "link_gbps": 400.0,
        "vocab_parallel_loss": False,
    }


def test_the_readable_output_says_what_network_the_ideal_times_assume() -> None:
    result = run("--model", "fashion-mnist-mlp", "--link-gbps", "400", "--latency-us", "2.5")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1] == "strategy data, mode tutorial; 4 GPUs on 4 hosts × 1; tp 1 pp 1 dp 4; micro-batch 2048 × 1"
    assert lines[2] == (
        "network: 400 Gbit/s per rank, α = 2.5 µs (--link-gbps, --latency-us: what the ideal µs column assumes)"
    )
    assert "KCCB (1 trial configuration, from the analytic list):" in lines
    assert "  hosts        4 hosts × 1 GPU per host" in lines


def test_expert_parallel_mixtral_prints_its_all_to_all_and_names_ep_in_errors() -> None:
    result = run("--model", "mixtral-8x7b", "--ep", "8", "--export", "text")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "# trial 1: ALGO_ALL_TO_ALL_PARALLEL (1), iterations 100, 1 host x 8 GPUs per host\n67108864\n16384\n\n"
    )
    result = run("--model", "mixtral-8x7b", "--ep", "8", "--hot-expert-factor", "2")
    assert "tp 1 pp 1 dp 8 ep 8;" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("MoE token dispatch + combine"))
    assert row.split()[-7:] == ["all_to_all", "134,217,728", "134,217,728", "8192", "forward", "ep×8", "9,430.2"]
    result = run("--model", "mixtral-8x7b", "--ep", "3")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --ep: expert-parallel groups are carved from the data-parallel ranks, but ep 3 does not divide dp 8\n"
    )
