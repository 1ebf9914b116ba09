"""``emuplan import / runs / stats / compare`` print the same data as the API."""

import json

from scipy.stats import ks_2samp
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.results import parse_result_file
from paths import RESULTS, SHARED_NCCL

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_import_runs_stats_compare(cli_env, client):
    imported = invoke(
        "import", str(RESULTS / "generated-per-iteration.csv"), "--strategy", "pipeline", "--tag", "demo", "--json"
    )
    assert imported.exit_code == 0, imported.output
    first = json.loads(imported.output)
    assert (first["source_format"], first["sample_count"], first["strategy"], first["tags"]) == (
        "per-iteration",
        2000,
        "pipeline",
        ["demo"],
    )
    text = invoke("import", str(SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"), "--name", "V100 bcast")
    assert text.exit_code == 0, text.output
    assert text.output.startswith("run 2: V100 bcast (nccl-tests, 62 samples, 12 ranks on 1 host)")
    assert "broadcast · 8589934592 B · in-place" in text.output

    listed = json.loads(invoke("runs", "--json").output)
    assert [r["id"] for r in listed] == [2, 1]
    assert listed == client.get("/api/runs").json()  # the same documents the API answers with
    stats = json.loads(invoke("stats", "1", "--json").output)
    assert stats["overall"] == first["summary"]["overall"]
    assert [g["count"] for g in stats["groups"]] == [500, 500, 500, 500]
    assert stats == client.get("/api/runs/1/stats").json()

    compared = invoke("compare", "1", "2", "--baseline", "2")
    assert compared.exit_code == 0, compared.output
    assert compared.output.startswith("baseline: run 2")
    generated = parse_result_file((RESULTS / "generated-per-iteration.csv").read_bytes(), "g.csv").samples
    broadcast = parse_result_file((SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt").read_bytes(), "b.txt").samples
    expected = ks_2samp(generated["duration_us"].to_numpy().round(3), broadcast["duration_us"].to_numpy().round(3))
    assert f"run 1 vs run 2: D = {expected.statistic:.4f}, p = {expected.pvalue:.3g} (exact)" in compared.output
    [api_test] = client.get("/api/compare", params={"runs": "1,2", "baseline": 2}).json()["ks_tests"]
    assert (api_test["run_a"], api_test["run_b"], api_test["method"]) == (1, 2, "exact")
    assert f"D = {api_test['statistic']:.4f}, p = {api_test['pvalue']:.3g}" in compared.output


def test_cli_errors_exit_2_with_the_message(cli_env, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"iteration,size,time_ms\n0,8,1\n1,8,-5\n")
    result = invoke("import", str(bad))
    assert result.exit_code == 2
    assert "bad.csv: line 3, column 'time_ms': -5.0 is not a valid time: negative" in result.output
    assert invoke("stats", "42").exit_code == 2
    good = RESULTS / "generated-fct.txt"
    assert invoke("import", str(good)).exit_code == 0
    again = invoke("import", str(good))
    assert again.exit_code == 2 and "already imported as run 1" in again.output


def test_runs_lists_whole_names_under_a_header_and_filters_in_any_case(cli_env):
    long_name = "fabric A · all-reduce sweep after the 2026-11 firmware update on rail 3 (second attempt)"
    for file_name, name, tag in (
        ("generated-fct.txt", long_name, "Fabric-A"),
        ("generated-per-flow.csv", "short", "b"),
    ):
        imported = invoke("import", str(RESULTS / file_name), "--name", name, "--tag", tag, "--json")
        assert imported.exit_code == 0, imported.output

    narrow = runner.invoke(app, ["runs"], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    lines = narrow.output.splitlines()
    assert lines[0].split() == ["id", "name", "format", "origin", "strategy", "samples", "p50", "µs"]
    assert max(len(line.rstrip()) for line in lines) <= 80
    # The long name is folded over several lines of its column, never cut.
    name_start = lines[0].index("name")
    name_width = lines[0].index("format") - name_start
    folded = "".join(line[name_start : name_start + name_width].strip() + " " for line in lines[1:]).strip()
    assert long_name.replace(" ", "") in folded.replace(" ", "")

    wide = runner.invoke(app, ["runs", "--wide"], env={"COLUMNS": "80"})
    assert [line.split()[0] for line in wide.output.splitlines()] == ["id", "2", "1"]
    assert long_name in wide.output.splitlines()[2]

    for tag in ("fabric-a", "FABRIC-A", "Fabric-A"):
        tagged = json.loads(invoke("runs", "--tag", tag, "--json").output)
        assert [run["name"] for run in tagged] == [long_name], tag
