"""The CLI at 80 columns (COLUMNS=80, as in a default terminal or a CI log): plan, import, stats, runs,
compare, trend and check print no line over 80 characters and never cut a number — every figure their
``--json`` twin gives is printed whole (no digit followed by "…")."""

import json
import re

from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.wording import gbps, time_in
from paths import RESULTS, SHARED_NCCL
from slower_sweep import B200_LOG, b200_slower_log

runner = CliRunner()
WIDTH = 80


def at_80(*args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": str(WIDTH)})
    assert result.exit_code in (0, 1), result.output  # check exits 1 on a failing run
    return result.output


def json_of(*args: str):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


def assert_fits(text: str) -> None:
    too_long = [line for line in text.splitlines() if len(line) > WIDTH]
    assert too_long == []
    # Rich cut numbers with an ellipsis ("472…", "2026-12-07 11…"); the labels' own "a … b" stays.
    assert re.findall(r"\d…", text) == []


def assert_whole(numbers: list[str], text: str) -> None:
    """Each number appears in ``text`` as a whole token: no digit, comma or point glued to either side."""
    missing = [n for n in numbers if not re.search(rf"(?<![\d.,]){re.escape(n)}(?![\d]|[.,]\d)", text)]
    assert missing == []


def test_every_table_fits_80_columns_with_every_number_whole(cli_env, tmp_path) -> None:
    plan_args = ["plan", "--model", "llama-3-70b", "--strategy", "hybrid", "--tp", "8", "--pp", "8", "--dp", "16"]
    plan_args += ["--seq-len", "8192", "--micro-batch", "1", "--mode", "framework"]
    text = at_80(*plan_args)
    assert_fits(text)
    document = json_of(*plan_args)
    assert len(document["collectives"]) == 57  # the stage that bounds the step (issue 41: every stage counted)
    assert_whole([f"{item['bytes_per_rank']:,}" for item in document["collectives"]], text)
    assert_whole([str(item["count_per_step"]) for item in document["collectives"]], text)
    assert_whole([time_in(item["ideal_time_us"]) for item in document["collectives"]], text)
    # The columns left out are named, with where to find them.
    assert "(left out to fit 80 columns: bytes_total, phase; --wide or --json has them)" in text
    assert max(len(line) for line in at_80(*plan_args, "--wide").splitlines()) > WIDTH

    saved = runner.invoke(app, ["plan", "--model", "fashion-mnist-mlp", "--strategy", "data", "--save"])
    assert saved.output.strip().endswith("saved plan id 1")

    slower = tmp_path / "b200-slower.txt"
    slower.write_bytes(b200_slower_log())
    imports = [
        at_80("import", str(B200_LOG), "--platform", "b200-400g"),
        at_80("import", str(slower), "--platform", "b200-400g"),
        at_80("import", str(SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"), "--platform", "b200-400g"),
        at_80("import", str(RESULTS / "generated-per-iteration.csv"), "--plan", "1"),
    ]
    for run_id, text in enumerate(imports, start=1):
        assert_fits(text)
        statistics = json_of("stats", str(run_id))
        # The import ends with the run's headline and its verdict, whatever the verdict's status.
        lines = text.splitlines()
        verdict_line = next(i for i, line in enumerate(lines) if line.startswith("verdict: "))
        assert lines[verdict_line].startswith(f"verdict: {statistics['verdict']['status']} ")
        assert "headline:" in lines[:verdict_line]
        stats_text = at_80("stats", str(run_id))
        assert_fits(stats_text)
        for shown in (text, stats_text):
            for reason in statistics["verdict"]["reasons"]:
                assert_whole(re.findall(r"\d[\d,]*(?:\.\d+)?", reason["message"]), shown)
        if statistics["kind"] == "size-sweep":
            rows = [row for entry in statistics["sweep"]["collectives"] for t in entry["tables"] for row in t["rows"]]
            for shown in (text, stats_text):
                assert_whole([f"{row['size_bytes']:,}" for row in rows], shown)
                assert_whole([gbps(entry["peak_busbw_gbps"]) for entry in statistics["sweep"]["collectives"]], shown)
        else:
            overall = statistics["overall"]
            assert_whole([time_in(overall["p50_us"]), time_in(overall["p99_us"]), f"{overall['count']:,}"], text)
            assert_whole([f"{row['run_size_bytes']:,}" for row in statistics["step_cost"]["rows"]], stats_text)

    text = at_80("runs")
    assert_fits(text)
    listed = json_of("runs")
    assert_whole([gbps(run["peak_busbw_gbps"]) for run in listed if run["peak_busbw_gbps"] is not None], text)
    assert_whole([time_in(run["p50_us"]) for run in listed if run["kind"] == "distribution"], text)

    text = at_80("compare", "1", "2")
    assert_fits(text)
    compared = json_of("compare", "1", "2")
    changes = [row for run in compared["sweep"]["runs"] for row in run["sizes"] if row["verdict"] is not None]
    assert_whole([f"{row['change_pct']:+.1f}" for row in changes], text)
    assert_whole([f"{row['size_bytes']:,}" for row in changes], text)
    # The table names both runs' columns.
    assert re.search(r"size B\s+#1 GB/s\s+#2 GB/s", text)

    text = at_80("compare", "4", "1", "--plan", "1")
    assert_fits(text)

    text = at_80("trend", "--platform", "b200-400g")
    assert_fits(text)
    series = json_of("trend", "--platform", "b200-400g")
    assert_whole([gbps(entry["value"]) for entries in series["figures"].values() for entry in entries], text)
    assert_whole([str(entry["run_id"]) for entries in series["figures"].values() for entry in entries], text)

    # The lists too: platforms (their figures wrapped under the title) and plans.
    for listing in (("platforms", "list"), ("plans",)):
        assert_fits(at_80(*listing))
    assert at_80("platforms", "list").splitlines()[1].startswith(" " * 13)  # under the title, past the name

    text = at_80("check", "1", "2", "3", "4")
    assert_fits(text)
    for verdict in json_of("check", "1", "2", "3", "4"):
        assert f"run {verdict['run_id']} {verdict['name']}: {verdict['status']} " in text
        for reason in verdict["reasons"]:
            assert_whole(re.findall(r"\d[\d,]*(?:\.\d+)?", reason["message"]), text)


def test_help_follows_the_users_journey() -> None:
    text = runner.invoke(app, ["--help"], env={"COLUMNS": str(WIDTH)}).output
    assert_fits(text)
    listed = re.findall(r"^│ ([a-z][a-z-]+) ", text, flags=re.MULTILINE)
    assert listed == [
        "plan", "import", "stats", "compare", "check", "trend", "runs", "plans", "comparisons", "relabel",
        "observed", "export-kccb", "export-workload", "measure", "simulate", "platforms", "serve", "users",
        "backup", "restore",
    ]  # fmt: skip
