"""``emuplan import / runs / stats / compare`` print the same data as the API."""

import json

import pytest
from scipy.stats import ks_2samp
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.results import parse_result_file
from paths import NCCL_TESTS, RESULTS, SHARED_NCCL
from slower_sweep import B200_LOG, b200_slower_log

pytestmark = pytest.mark.both_databases

runner = CliRunner()


def invoke(*args: str):
    """As on a terminal wide enough for every line whole (tests/api/test_cli_fits.py reads the CLI at 80)."""
    return runner.invoke(app, list(args), env={"COLUMNS": "1000"})


def test_import_runs_stats_compare(cli_env, client, tmp_path):
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
    # A size sweep: its peak and average busbw and a row per size, not a one-sample percentile table.
    assert (
        "  broadcast: peak busbw 122.15 GB/s at 8,589,934,592 B out-of-place; average busbw 41.25 GB/s over 62 cells "
        "(log: 41.2456, agrees)"
    ) in text.output.splitlines()
    assert "p50" not in text.output and "broadcast · 8589934592 B · in-place" not in text.output

    listed = json.loads(invoke("runs", "--json").output)
    assert [r["id"] for r in listed] == [2, 1]
    assert listed == client.get("/api/runs").json()  # the same documents the API answers with
    stats = json.loads(invoke("stats", "1", "--json").output)
    assert stats["overall"] == first["summary"]["overall"]
    assert [g["count"] for g in stats["groups"]] == [500, 500, 500, 500]
    assert stats == client.get("/api/runs/1/stats").json()

    rows = (RESULTS / "generated-per-iteration.csv").read_text().splitlines(keepends=True)
    first_half = tmp_path / "first-half.csv"
    first_half.write_text("".join(rows[:1001]))  # the header and the first 1000 of the 2000 rows
    assert invoke("import", str(first_half)).exit_code == 0

    compared = invoke("compare", "1", "2", "3", "--baseline", "2")
    assert compared.exit_code == 0, compared.output
    lines = compared.output.splitlines()
    assert lines[0] == "training step: no run has a plan (--plan PLAN for every run, or RUN:PLAN, reads runs with one)"
    assert lines[1] == "baseline: run 2"
    assert lines[2] == (
        "note: #1 generated-per-iteration.csv, #3 first-half.csv share no (collective, data size) with the "
        "baseline #2 V100 bcast: no ratios against it and no Kolmogorov–Smirnov test, which would compare "
        "unrelated collectives and sizes"
    )
    assert not any(line.startswith(("  run 1 vs run 2", "  run 2 vs run 3")) for line in lines)  # a sweep is not tested
    generated = parse_result_file((RESULTS / "generated-per-iteration.csv").read_bytes(), "g.csv").samples
    durations = generated["duration_us"].to_numpy().round(3)
    expected = ks_2samp(durations, durations[:1000])
    assert f"  run 1 vs run 3: D = {expected.statistic:.4f}, p = {expected.pvalue:#.3g} (exact)" in lines
    # The CLI prints the API's document: the same pairs tested, the same statistics.
    api_tests = client.get("/api/compare", params={"runs": "1,2,3", "baseline": 2}).json()["ks_tests"]
    assert [(t["run_a"], t["run_b"], t["comparable"], t["method"]) for t in api_tests] == [(1, 3, True, "exact")]
    api_test = api_tests[0]
    assert f"  run 1 vs run 3: D = {api_test['statistic']:.4f}, p = {api_test['pvalue']:#.3g} (exact)" in lines
    # Against a comparable baseline the ratios are printed to 3 significant figures.
    document = json.loads(invoke("compare", "1", "3", "--json").output)
    ratio = document["runs"][1]["overall"]["p50_us"]["ratio"]
    row = next(line for line in invoke("compare", "1", "3").output.splitlines() if line.startswith("  #3 "))
    assert f" {ratio:#.3g}× " in row and len(f"{ratio:#.3g}".replace(".", "").lstrip("0")) == 3


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
    log = NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"
    assert invoke("import", str(log)).exit_code == 0
    text = invoke("stats", "1", "--link-gbps", "400", "--latency-us", "2")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    # The verdict first: no platform, so nothing is expected of the log, and nothing else is wrong with it.
    assert lines[1:3] == [
        "verdict: not judged (no platform)",
        "  note: no platform: nothing is expected of the run; name the platform it ran on (the run page's Platform, "
        "emuplan import --platform or emuplan platforms assign, PATCH /api/runs/{id} platform)",
    ]
    lines = lines[2:]
    assert lines[1] == "assumed: link 400 Gbit/s per rank (query), α 2 µs (query), ranks 16 (file)"
    assert lines[2].startswith(
        f"note: Above 100% of ideal in #1 {log.name}: up to 677.8% at 400 Gbit/s per rank and α 2 µs."
    )
    assert lines[3] == (
        "  all_reduce: peak busbw 338.82 GB/s at 8,589,934,592 B out-of-place; average busbw 70.74 GB/s "
        "over 62 cells (log: 70.742, agrees)"
    )
    # Without a link typed (or a plan's, or a platform) there is no % of ideal at all: the server's fallback
    # link is not applied silently.
    assert json.loads(invoke("stats", "1", "--json").output)["above_ideal_pct"] is None
    # NVLink's 338.82 GB/s busbw read against a 100 Gbit/s NIC: the page and the CLI say the link is off.
    slow_link = invoke("stats", "1", "--link-gbps", "100", "--latency-us", "5").output.splitlines()
    assert slow_link[4] == (
        f"note: Above 100% of ideal in #1 {log.name}: up to 2,710.9% at 100 Gbit/s per rank and α 5 µs. The "
        "collectives ran faster than the α-β model allows on that link, so the assumed link is slower than the "
        "fabric measured: set the link speed (and α) the fabric really has (NVLink, say) for a % of ideal that "
        "means something. Here: --link-gbps and --latency-us."
    )
    typed = invoke("stats", "1", "--link-gbps", "100", "--latency-us", "5", "--json").output
    assert json.loads(typed)["above_ideal_pct"] == pytest.approx(2710.9291864941624)
    document = json.loads(invoke("stats", "1", "--link-gbps", "400", "--json").output)
    assert document["sweep"]["ceiling_gbps"] == 50.0
    assert document["assumptions"]["sources"] == {"link_gbps": "query", "latency_us": "settings", "ranks": "file"}


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
    lines = [line.rstrip() for line in narrow.output.splitlines()]
    # Each run its whole name (folded, never cut), its figures under it, as the header's second line names them.
    assert lines[:2] == ["id  name", "    collective · sizes · ranks×hosts · headline · verdict · platform · tags"]
    assert max(len(line) for line in lines) <= 80
    assert lines[2:] == [
        " 2  short",
        "    all_reduce · — · 4 · p50 1,194.5 µs · not judged · – · b",
        " 1  fabric A · all-reduce sweep after the 2026-11 firmware update on rail 3",
        "    (second attempt)",
        "    unknown · — · – · p50 439.2 µs · not judged · – · Fabric-A",
    ]

    wide = runner.invoke(app, ["runs", "--wide"], env={"COLUMNS": "80"})
    assert [line.split()[0] for line in wide.output.splitlines()] == ["id", "2", "1"]
    assert long_name in wide.output.splitlines()[2]

    for tag in ("fabric-a", "FABRIC-A", "Fabric-A"):
        tagged = json.loads(invoke("runs", "--tag", tag, "--json").output)
        assert [run["name"] for run in tagged] == [long_name], tag


def test_stats_names_the_slowest_rank_and_host_of_a_file_that_times_every_rank(cli_env):
    report = RESULTS / "nccl-tests-json" / "constructed-4proc-2host-allreduce-I1.json"
    assert invoke("import", str(report)).exit_code == 0
    text = invoke("stats", "1")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("stragglers (")))
    assert lines[start + 1 :] == [
        "  slowest rank 3 on gpu-b: 1.167× the median rank, 1.48 ms lost over 16 calls (92.5 µs per call)",
        "  slowest host gpu-b: 1.079× the median host, 760.0 µs lost over 16 calls (47.5 µs per call)",
        "  rank  host   calls  mean µs  ×median  lost µs  slowest",
        "  0     gpu-a     16    550.0    0.995    -40.0        0",
        "  1     gpu-a     16    550.0    0.995    -40.0        0",
        "  2     gpu-b     16    555.0    1.005     40.0        0",
        "  3     gpu-b     16    645.0    1.167  1,480.0       16",
    ]
    assert max(len(line) for line in lines[start + 3 :]) <= 80  # the table fits a terminal


def test_compare_takes_assumptions_and_prints_busbw_and_percent_of_ideal_per_group(cli_env, tmp_path):
    # Five iterations of one size: distributions (a sweep has at most 4 samples per size), mean = p50.
    for name, times in (("slow.csv", (100, 150, 200, 250, 300)), ("fast.csv", (50, 75, 100, 125, 150))):
        rows = "".join(f"{i},all_reduce,1000000,{t}\n" for i, t in enumerate(times))
        (tmp_path / name).write_text(f"iteration,collective,size_bytes,duration_us\n{rows}")
        assert invoke("import", str(tmp_path / name)).exit_code == 0
    text = invoke("compare", "1", "2", "--ranks", "4", "--link-gbps", "100", "--latency-us", "5")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[2:4] == [
        "run 1 assumed: link 100 Gbit/s per rank (query), α 5 µs (query), ranks 4 (query)",
        "run 2 assumed: link 100 Gbit/s per rank (query), α 5 µs (query), ranks 4 (query)",
    ]
    # fast.csv's 150 % of ideal: the compare warns as the run page does, in the same words.
    assert lines[4].startswith("note: Above 100% of ideal in #2 fast.csv: up to 150.0% at 100 Gbit/s per rank and α 5")
    start = lines.index("per data size and collective (×base: run ÷ baseline):")
    assert lines[start + 2 : start + 5] == [
        "  all_reduce · 1000000 B",
        "    #1 slow.csv            200.0   1.00×        7.50  1.00×     75.0  1.00×",
        "    #2 fast.csv            100.0  0.500×       15.00  2.00×    150.0  2.00×",
    ]
    document = json.loads(invoke("compare", "1", "2", "--ranks", "4", "--json").output)
    assert document["assumptions"][0]["sources"] == {
        "link_gbps": "settings",
        "latency_us": "settings",
        "ranks": "query",
    }


def test_a_size_sweep_reads_as_a_sweep_in_import_runs_stats_and_compare(cli_env, client, tmp_path):
    """Two real B200 sweeps, the second 25 % slower at 512 MiB, 1 GiB and 2 GiB: peak and average busbw, per-size
    ratios and a verdict line; no percentiles and no Kolmogorov–Smirnov test."""
    slower = tmp_path / "b200-allreduce-slower.txt"
    slower.write_bytes(b200_slower_log())
    imported = invoke("import", str(B200_LOG), "--name", "B200")
    assert imported.exit_code == 0, imported.output
    lines = imported.output.splitlines()
    # The sizes as nccl-tests printed them, then the answer: the headline and the verdict.
    assert lines[3:5] == [
        "  collective / variant            size B  time µs  algbw GB/s  busbw GB/s",
        "  all_reduce out-of-place              8    36.50        0.00        0.00",
    ]
    headline = lines.index("headline:")
    assert (
        lines[headline - 1] == "  all_reduce in-place      2,147,483,648  5728.40      374.88      702.91"
    )  # as printed
    # The verdict as `emuplan check` states it: its status, then each reason (severity: message).
    (verdict,) = json.loads(invoke("check", "1", "--json").output)
    assert lines[headline + 1 :] == [
        "  all_reduce: peak busbw 702.91 GB/s at 2,147,483,648 B in-place; average busbw 137.18 GB/s over 58 cells "
        "(log: 137.179, agrees)",
        f"verdict: {verdict['status']} (no platform)",
        *(f"  {reason['severity']}: {reason['message']}" for reason in verdict["reasons"]),
    ]
    assert not any("p50" in line or "p99" in line for line in lines)
    assert invoke("import", str(slower), "--name", "B200 slower").exit_code == 0
    assert invoke("import", str(RESULTS / "generated-per-iteration.csv")).exit_code == 0

    listed = runner.invoke(app, ["runs", "--wide"], env={"COLUMNS": "200"}).output.splitlines()
    # Each headlined by its kind's figure, then its verdict (no platform: nothing is expected of them, and
    # nothing else is wrong). Then (--wide has room for them) the platform, none, and the tags, none.
    assert [line.split()[-10:] for line in listed[1:]] == [
        ["785", "KiB", "–", "p50", "19,922.8", "µs", "not", "judged", "–", "–"],
        ["2", "GiB", "16", "peak", "562.33", "GB/s", "not", "judged", "–", "–"],
        ["2", "GiB", "16", "peak", "702.91", "GB/s", "not", "judged", "–", "–"],
    ]
    assert [(r["kind"], r["peak_busbw_gbps"]) for r in json.loads(invoke("runs", "--json").output)] == [
        ("distribution", None),
        ("size-sweep", 562.33),
        ("size-sweep", 702.91),
    ]
    stats = invoke("stats", "2").output.splitlines()
    assert stats[1] == "verdict: not judged (no platform)"
    stats = [line for line in stats if not line.startswith(("verdict: ", "  degraded: ", "  note: "))]
    assert stats[2] == (
        "  all_reduce: peak busbw 562.33 GB/s at 2,147,483,648 B in-place; average busbw 123.49 GB/s over 58 cells "
        "(log: 123.49, agrees)"
    )
    assert not any("p50" in line or "p99" in line for line in stats)

    compared = invoke("compare", "1", "2")
    assert compared.exit_code == 0, compared.output
    lines = compared.output.splitlines()
    assert lines[4:8] == [
        "size sweeps against #1 (busbw per size, the mean of its out-of-place and in-place cells; within ±5 % is the "
        "same):",
        "  #1 B200 all_reduce: peak busbw 702.91 GB/s, average busbw 137.18 GB/s",
        "  #2 B200 slower all_reduce: peak busbw 562.33 GB/s, average busbw 123.49 GB/s",
        "  #2 vs #1: −20.0 % busbw at 3 sizes (512 MiB–2 GiB), same (within ±5 %) at 22 sizes (128 B–256 MiB); 4 "
        "sizes (8 B–64 B) left out: busbw 0.00 GB/s in both, under the log's resolution",
    ]
    assert lines[-1] == "    all_reduce  2,147,483,648   699.48   559.59  0.800×  -20.0 %"
    assert not any(line.startswith("Kolmogorov") or "p50" in line for line in lines)
    document = json.loads(invoke("compare", "1", "2", "--json").output)
    assert document["ks_tests"] == [] and document["sweep"]["runs"][1]["verdict"] == lines[7].strip()
    assert document == client.get("/api/compare", params={"runs": "1,2"}).json()

    # Beside a distribution: each run as its kind, the distribution alone in the overall table.
    mixed = invoke("compare", "3", "1").output.splitlines()
    overall = mixed.index("all data sizes together (distributions only):")
    assert mixed[overall + 2].startswith("  #3 generated-per-iteration.csv ") and mixed[overall + 3].startswith(
        "per data"
    )
    assert (
        "size sweeps against #1 (busbw per size, the mean of its out-of-place and in-place cells; within ±5 % is the "
        "same):"
    ) in mixed
    assert not any(line.startswith("Kolmogorov") for line in mixed)  # one distribution: nothing to test
