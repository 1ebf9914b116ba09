"""Training vs emulation, and a KCCB trial from reality, through the API, the CLI and the run page on both
databases: an observed run compared with benchmarks size by size and per training step, and the KCCB trials that
replay what its job sent."""

import io
import json
import zipfile
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.store.db import Database
from paths import FIXTURES, RESULTS
from profiled_ddp import ddp_plan, saved_ddp_plan

pytestmark = pytest.mark.both_databases
# Wide enough for every line whole: tests/api/test_cli_fits.py reads the CLI at 80 columns.
runner = CliRunner(env={"COLUMNS": "1000"})
DUMP = [RESULTS / "nccl-inspector" / name for name in ("constructed-gpu-a-pid101.log", "constructed-gpu-b-pid202.log")]
GTX1080_ALL_GATHER = FIXTURES / "results" / "nccl-tests" / "gtx1080-2gpu-allgather-pre2.13.txt"
# A benchmark of the DDP plan's four collectives, five iterations each at one constant time (µs).
BENCHMARK_US = {("all_reduce", 4239400): 1000.0, ("all_reduce", 2109440): 500.0, ("broadcast", 8192): 100.0,
                ("broadcast", 8): 50.0}  # fmt: skip


def _dump_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in DUMP:
            archive.write(path, f"nccl-inspector-4242/{path.name}")
    return buffer.getvalue()


def _upload(client: TestClient, name: str, content: bytes) -> int:
    answer = client.post("/api/runs", files={"file": (name, content)})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def test_an_inspector_dump_lines_up_with_an_nccl_tests_sweep_size_by_size(client: TestClient) -> None:
    benchmark = _upload(client, GTX1080_ALL_GATHER.name, GTX1080_ALL_GATHER.read_bytes())
    job = _upload(client, "nccl-inspector-4242.zip", _dump_zip())
    document = client.get("/api/compare", params={"runs": f"{benchmark},{job}"}).json()
    assert document["training_vs_emulation"] == (
        f"Training vs emulation. Training: #{job} nccl-inspector-4242.zip (observed: the job's own records). "
        f"Emulation: #{benchmark} gtx1080-2gpu-allgather-pre2.13.txt (a benchmark). Per size, each training "
        "communicator is read against the benchmark's same collective and size; per step, the job's own calls × "
        "their times against the plan's step on the benchmark"
    )
    assert [(run["run_id"], run["side"]) for run in document["runs"]] == [(benchmark, "emulation"), (job, "training")]
    groups = {group["label"]: group for group in document["runs"][1]["groups"]}
    # The job's AllGather of 2 × 64 KiB took 60 µs on its slower rank; the log's out-of-place 131072 B, 131.6 µs.
    gathered = groups["all_gather · 131072 B · 0xc0ffee"]
    assert gathered["compared_with"] == "all_gather · 131072 B · out-of-place"
    assert gathered["stats"]["mean_us"] == {
        "value": 60.0,
        "baseline": 131.6,
        "delta": pytest.approx(-71.6),
        "ratio": pytest.approx(60 / 131.6),
        "verdict": "better",
    }
    assert groups["all_reduce · 1048576 B · 0xc0ffee"]["compared_with"] is None  # the log has no all-reduce
    # busbw per size, as the sweep section reads it: ours from the mean time on both sides (2 ranks: × 1/2),
    # the log's out-of-place and in-place averaged.
    (job_size,) = [row for row in document["sweep"]["runs"][1]["sizes"] if row["size_bytes"] == 131072]
    training, emulation = 131072 / 60e-6 / 1e9 / 2, (131072 / 131.6e-6 + 131072 / 133.5e-6) / 2 / 1e9 / 2
    assert job_size["busbw_ratio"] == pytest.approx(training / emulation)
    assert round(job_size["change_pct"], 1) == 120.9 and job_size["verdict"] == "better"
    assert document["sweep"]["runs"][1]["verdict"] == f"#{job} vs #{benchmark}: +120.9 % busbw at 1 size (128 KiB)"


def test_a_profiled_ddp_job_against_a_benchmark_of_its_plan_per_size_and_per_step(
    traces: list[Path], cli_env: str, client: TestClient, tmp_path: Path
) -> None:
    plan_id = saved_ddp_plan(Database(cli_env))
    imported = runner.invoke(app, ["import", "--job", *map(str, traces), "--plan", str(plan_id), "--json"])
    assert imported.exit_code == 0, imported.output
    job = json.loads(imported.stdout)["id"]
    rows = "".join(
        f"{iteration},{collective},{size},{us}\n"
        for (collective, size), us in BENCHMARK_US.items()
        for iteration in range(5)
    )
    csv = f"iteration,collective,size_bytes,duration_us\n{rows}".encode()
    benchmark = client.post("/api/runs", files={"file": ("bench.csv", csv)}, data={"plan_id": str(plan_id)}).json()
    document = client.get("/api/compare", params={"runs": f"{benchmark['id']},{job}"}).json()

    # Per size: each of the job's groups under the benchmark's same collective and size, its mean against the
    # benchmark's (a sweep's figures: the job timed each collective twice).
    job_stats = {g["label"]: g for g in client.get(f"/api/runs/{job}/stats").json()["groups"]}
    for group in document["runs"][1]["groups"]:
        collective, size, communicator = group["label"].split(" · ")
        assert communicator == "pg 0 (default_pg)"
        assert group["compared_with"] == f"{collective} · {size}"
        benchmark_us = BENCHMARK_US[(collective, int(size.removesuffix(" B")))]
        assert group["stats"]["mean_us"]["ratio"] == pytest.approx(job_stats[group["label"]]["mean_us"] / benchmark_us)

    # Per step: the benchmark prices the plan's four collectives; the job's own step is its calls per step (one
    # each, over ProfilerStep#2 and #3) × the p50 of its own calls.
    steps = {row["run_id"]: row for row in document["step_cost"]["rows"]}
    assert steps[benchmark["id"]]["step"]["p50_us"] == 1650.0
    assert steps[benchmark["id"]]["cost"]["observed_steps"] is None
    own = steps[job]["cost"]
    assert own["observed_steps"] == 2
    assert own["time_source"] == (
        "the job's own calls per step (over its training steps, per communicator) × their p50 and p99, the slowest "
        "communicator's"
    )
    assert sorted((row["op"], row["bytes_total"], row["count_per_step"], row["basis"]) for row in own["rows"]) == [
        ("all_reduce", 2109440, 1, "measured"),
        ("all_reduce", 4239400, 1, "measured"),
        ("broadcast", 8, 1, "measured"),
        ("broadcast", 8192, 1, "measured"),
    ]
    assert own["step"]["bytes_per_step"] == 6357040
    expected = sum(
        job_stats[f"{row['op']} · {row['bytes_total']} B · pg 0 (default_pg)"]["p50_us"] for row in own["rows"]
    )
    assert own["step"]["p50_us"] == pytest.approx(expected)
    assert steps[job]["ratio_p50"] == pytest.approx(expected / 1650.0)

    # The CLI says which run is which, and lines the job's groups up under the benchmark's sizes.
    text = runner.invoke(app, ["compare", str(benchmark["id"]), str(job)])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    after_baseline = lines[lines.index(f"baseline: run {benchmark['id']}") + 1]
    assert after_baseline.startswith(f"Training vs emulation. Training: #{job} rank0.json and 1 more (observed")
    start = lines.index("  all_reduce · 4239400 B")
    assert lines[start + 1].split()[:4] == [f"#{benchmark['id']}", "bench.csv", "1,000.0*", "1.00×"]
    # The whole name and communicator (the table once cut them to 30 characters: "rank0.json a pg 0 (default_").
    assert lines[start + 2].startswith(f"    #{job} rank0.json and 1 more pg 0 (default_pg)  ")

    # A KCCB trial from reality: what the job sent, one trial per collective, iterations = the steps counted.
    exported = client.get(f"/api/runs/{job}/kccb", params={"format": "yaml"})
    assert exported.status_code == 200, exported.text
    assert exported.headers["content-type"] == "application/yaml"
    assert exported.headers["content-disposition"] == f'attachment; filename="run-{job}-kccb.yaml"'
    trials = {trial["name"]: trial for trial in yaml.safe_load(exported.text)["trials"]}
    assert sorted(trials) == ["rank0.json and 1 more all_reduce group2", "rank0.json and 1 more broadcast group2"]
    reduced = trials["rank0.json and 1 more all_reduce group2"]
    # DDP's buckets in the order it sends them (bucket 0 first), as the plan's KCCB export lists them.
    assert reduced["benchmark"] == {
        "collective_algorithm": "ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING",
        "datasize_list": {"size_bytes": [4239400, 2109440]},
        "iterations": 2,
    }
    (planned,) = [trial for trial in ddp_plan().kccb_list() if trial.collective == "all_reduce"]
    assert planned.data_sizes == [4239400, 2109440]  # the plan's own export of the same model
    assert reduced["infrastructure"]["host"] == {"count": 1, "generic": {"npu_count": 2}}
    # DDP's two buffer broadcasts run together on gloo's worker threads: either may start first.
    broadcast = trials["rank0.json and 1 more broadcast group2"]["benchmark"]["datasize_list"]["size_bytes"]
    assert sorted(broadcast) == [8, 8192]

    page = client.get(f"/runs/{job}")
    assert f'<a class="button secondary" id="observed-kccb-yaml" href="/api/runs/{job}/kccb?format=yaml" download>' in (
        page.text
    )
    out = tmp_path / "job-kccb.txt"
    written = runner.invoke(app, ["export-kccb", str(job), "--format", "text", "--out", str(out)])
    assert written.exit_code == 0, written.output
    assert written.output == f"wrote the KCCB text export of run {job} to {out}\n"
    # Forward broadcasts the buffers before backward reduces the gradients: the broadcast trial comes first.
    lines = out.read_text().splitlines()
    assert lines[0] == "# trial 1: ALGO_BROADCAST_PARALLEL (40), iterations 2, 1 host x 2 GPUs per host"
    assert sorted(lines[1:3]) == ["8", "8192"]
    assert lines[4:] == [
        "# trial 2: ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING (10), iterations 2, 1 host x 2 GPUs per host",
        "4239400",
        "2109440",
    ]


def test_a_kccb_trial_needs_an_observed_run_with_steps(client: TestClient, cli_env: str) -> None:
    job = _upload(client, "nccl-inspector-4242.zip", _dump_zip())
    benchmark = _upload(client, GTX1080_ALL_GATHER.name, GTX1080_ALL_GATHER.read_bytes())
    no_steps = client.get(f"/api/runs/{job}/kccb")
    assert no_steps.status_code == 422
    assert no_steps.json()["detail"] == (
        "the run records no training steps (an NCCL Inspector dump has none): say how many steps it spans"
    )
    given = client.get(f"/api/runs/{job}/kccb", params={"steps": 3, "format": "text"})
    assert given.status_code == 200 and given.headers["content-type"] == "text/plain; charset=utf-8"
    assert given.text == (
        "# trial 1: ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING (10), iterations 3, 2 hosts x 1 GPU per host\n1048576\n\n"
        "# trial 2: ALGO_ALL_GATHER_RING (20), iterations 3, 2 hosts x 1 GPU per host\n65536\n"
    )
    not_observed = client.get(f"/api/runs/{benchmark}/kccb")
    assert not_observed.status_code == 422
    assert not_observed.json()["detail"].startswith(
        f"run {benchmark} is not an observed run: a KCCB trial from reality"
    )
    assert client.get(f"/api/runs/{job}/kccb", params={"format": "xml"}).status_code == 422
    assert client.get("/api/runs/999999/kccb").status_code == 404
    # The run page asks for the steps a dump spans before it exports.
    page = client.get(f"/runs/{job}").text
    assert f'<form class="inputs" id="observed-kccb" method="get" action="/api/runs/{job}/kccb">' in page
    refused = runner.invoke(app, ["export-kccb", str(benchmark)])
    assert refused.exit_code == 2 and f"run {benchmark} is not an observed run" in refused.output
