"""Chakra export at scale: Llama-3-70B, framework hybrid tp 8 × pp 8 × dp 16 (1,024 ranks), zipped as the
download streams it, against the same plan's 8 stage ranks (one per pipeline stage), in paired rounds: in a fresh
interpreter each (so its peak RSS is its own), then through real HTTP from `emuplan serve` (issue 32's
``GET /api/plans/{id}/workload?format=chakra&ranks=0-1023``, the server's peak RSS read from /proc).

Targets: every rank in ≤ 10× the stage ranks' time, peak RSS ≤ 1 GB. ``--405b`` adds one run of
Llama-3.1-405B at tp 8 × pp 16 × dp 128 (16,384 ranks; its config.json written from Meta's published figures).

    .venv/bin/python bench/bench_chakra.py [rounds] [--405b]
"""

import json
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from paired import load_average, missed_targets, paired_rounds, ratios, spread
from serve import start_server, stop_server

HYBRID_70B = dict(model="llama-3-70b", strategy="hybrid", mode="framework", tp=8, pp=8, dp=16, seq_len=8192,
                  micro_batch=1)  # fmt: skip
HYBRID_405B = dict(strategy="hybrid", mode="framework", tp=8, pp=16, dp=128, seq_len=8192, micro_batch=1)
LLAMA_31_405B = {
    "model_type": "llama", "hidden_size": 16384, "intermediate_size": 53248, "num_hidden_layers": 126,
    "num_attention_heads": 128, "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "rope_theta": 500000.0,
}  # fmt: skip


def measure_export(options: dict, stage_ranks_only: bool) -> dict:
    from emuplan.workload.chakra.bundle import bundle_files, zip_stream
    from emuplan.workload.chakra.schedule import ComputeModel, build_traces, rank_of
    from emuplan.workload.document import PlanRequest
    from emuplan.workload.planner import plan_workload
    from emuplan.workload.sources import resolve_model

    inventory = resolve_model(options["model"])
    document = plan_workload(PlanRequest(**options), inventory)
    inputs = document.inputs
    ranks = [rank_of(inputs, 0, stage, 0) for stage in range(inputs.pp)] if stage_ranks_only else None
    started = time.perf_counter()
    files = bundle_files(document, build_traces(document, inventory, ComputeModel.from_options(), ranks), "bench")
    zipped = sum(len(chunk) for chunk in zip_stream(files))
    return {
        "seconds": time.perf_counter() - started,
        "files": len(files),
        "zip_mb": zipped / 1e6,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def download_seconds(url: str) -> float:
    """Wall time of one GET of ``url``, its body read in 1 MiB pieces as a client saving it would."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=900) as response:
        while response.read(1 << 20):
            pass
    return time.perf_counter() - started


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024


def measure_http(rounds: int) -> tuple[dict[str, list[float]], float]:
    """Seconds per download of the 8 stage ranks and of every rank, paired, and the server's peak RSS after them."""
    with tempfile.TemporaryDirectory() as directory:
        server, base = start_server(directory)
        try:
            request = urllib.request.Request(
                f"{base}/api/plans", json.dumps(HYBRID_70B).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=120) as response:
                plan_id = json.load(response)["id"]
            url = f"{base}/api/plans/{plan_id}/workload?format=chakra&ranks="
            stage_ranks = ",".join(str(stage * 8) for stage in range(8))  # tp 8: stage s starts at rank 8·s
            cases = {"stage-ranks": stage_ranks, "every-rank": "0-1023"}
            seconds = paired_rounds(
                {name: (lambda r=r: download_seconds(url + r)) for name, r in cases.items()}, rounds
            )
            return seconds, peak_rss_mb(server.pid)
        finally:
            stop_server(server)


def run_case(name: str, options: dict) -> dict:
    command = [sys.executable, __file__, name, json.dumps(options)]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] in ("stage-ranks", "every-rank"):
        print(json.dumps(measure_export(json.loads(sys.argv[2]), sys.argv[1] == "stage-ranks")))
        return
    rounds = int(next((arg for arg in sys.argv[1:] if arg.isdigit()), "3"))
    values = paired_rounds(
        {name: (lambda name=name: run_case(name, HYBRID_70B)) for name in ("stage-ranks", "every-rank")}, rounds
    )
    seconds = {name: [run["seconds"] for run in runs] for name, runs in values.items()}
    every = values["every-rank"]
    ratio = ratios(seconds, "every-rank", "stage-ranks")
    rss = [run["peak_rss_mb"] for run in every]
    print(f"export llama-3-70b framework hybrid tp8 pp8 dp16 seq 8192 micro-batch 1, zip streamed ({rounds} rounds)")
    print(f"  8 stage ranks   {spread(seconds['stage-ranks'], 2, ' s')}")
    print(f"  1,024 ranks     {spread(seconds['every-rank'], 2, ' s')}; {every[0]['files']} files, zip "
          f"{every[0]['zip_mb']:.0f} MB")  # fmt: skip
    print(f"  peak RSS        {spread(rss, 0, ' MB')} (target ≤ 1024 MB)")
    http, server_rss = measure_http(rounds)
    http_ratio = ratios(http, "every-rank", "stage-ranks")
    print(f"the same plan through HTTP from emuplan serve, GET …/workload?format=chakra&ranks= ({rounds} rounds)")
    print(f"  8 stage ranks   {spread(http['stage-ranks'], 2, ' s')}")
    print(f"  ranks=0-1023    {spread(http['every-rank'], 2, ' s')}")
    print(f"  server peak RSS {server_rss:.0f} MB (target ≤ 1024 MB)")
    if "--405b" in sys.argv:
        with tempfile.TemporaryDirectory() as folder:
            config = Path(folder) / "llama-3.1-405b.json"
            config.write_text(json.dumps(LLAMA_31_405B))
            run = run_case("every-rank", {"model": str(config), **HYBRID_405B})
        print(f"export llama-3.1-405b hybrid tp8 pp16 dp128 (16,384 ranks): {run['seconds']:.1f} s, "
              f"{run['files']} files, zip {run['zip_mb']:.0f} MB, peak RSS {run['peak_rss_mb']:.0f} MB")  # fmt: skip
    missed = missed_targets(
        [("every rank ÷ stage ranks", ratio, 10), ("HTTP: every rank ÷ stage ranks", http_ratio, 10)]
    )
    print(f"  load average after: {load_average()}")
    if missed or max(rss) > 1024 or server_rss > 1024:
        sys.exit("target missed")


if __name__ == "__main__":
    main()
