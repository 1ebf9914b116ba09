"""``emuplan import / runs / stats / compare`` print the same data as the API."""

import json
from pathlib import Path

from scipy.stats import ks_2samp
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.results import parse_result_file

RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "results"
SHARED_NCCL = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "nccl-tests"
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_import_runs_stats_compare(cli_env):
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
    assert text.output.startswith("run 2: V100 bcast (nccl-tests, 62 samples, 12 ranks on 1 hosts)")
    assert "broadcast · 8589934592 B · in-place" in text.output

    listed = json.loads(invoke("runs", "--json").output)
    assert [r["id"] for r in listed] == [2, 1]
    stats = json.loads(invoke("stats", "1", "--json").output)
    assert stats["overall"] == first["summary"]["overall"]
    assert [g["count"] for g in stats["groups"]] == [500, 500, 500, 500]

    compared = invoke("compare", "1", "2", "--baseline", "2")
    assert compared.exit_code == 0, compared.output
    assert compared.output.startswith("baseline: run 2")
    generated = parse_result_file((RESULTS / "generated-per-iteration.csv").read_bytes(), "g.csv").samples
    broadcast = parse_result_file((SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt").read_bytes(), "b.txt").samples
    expected = ks_2samp(generated["duration_us"].to_numpy().round(3), broadcast["duration_us"].to_numpy().round(3))
    assert f"run 1 vs run 2: D = {expected.statistic:.4f}, p = {expected.pvalue:.3g} (exact)" in compared.output


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


def test_stats_of_a_size_sweep_prints_the_headline_and_takes_assumptions(cli_env):
    log = RESULTS / "nccl-tests" / "h100-16rank-allreduce-mpirun.txt"
    assert invoke("import", str(log)).exit_code == 0
    text = invoke("stats", "1", "--link-gbps", "400", "--latency-us", "2")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[1] == "assumed: link 400 Gbit/s per rank (query), α 2 µs (query), ranks 16 (file)"
    assert lines[2] == (
        "  all_reduce: peak busbw 338.82 GB/s at 8,589,934,592 B out-of-place; average busbw 70.74 GB/s "
        "over 62 cells (log: 70.742, agrees)"
    )
    document = json.loads(invoke("stats", "1", "--link-gbps", "400", "--json").output)
    assert document["sweep"]["ceiling_gbps"] == 50.0
    assert document["assumptions"]["sources"] == {"link_gbps": "query", "latency_us": "settings", "ranks": "file"}
