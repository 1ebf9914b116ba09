"""Planning speed and memory: Llama-3-70B, framework hybrid tp 8 × pp 8 × dp 16, seq 8192, micro-batch 1.

Targets: < 1 s after import, < 600 MB peak RSS. Each case runs in a fresh interpreter so its peak RSS
is its own. Baselines measured in the same run: the seed MLP plan and a bare ``import torch``.

    .venv/bin/python bench/bench_plan.py
"""

import json
import resource
import subprocess
import sys
import time

REPEATS = 5
HYBRID_70B = dict(model="llama-3-70b", strategy="hybrid", mode="framework", tp=8, pp=8, dp=16, seq_len=8192,
                  micro_batch=1)  # fmt: skip
SEED_MLP = dict(model="fashion-mnist-mlp", strategy="data")


def measure_plan(options: dict) -> dict:
    started = time.perf_counter()
    from emuplan.workload.document import PlanRequest
    from emuplan.workload.planner import plan_workload
    from emuplan.workload.sources import resolve_model

    imported = time.perf_counter()
    timings = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        document = plan_workload(PlanRequest(**options), resolve_model(options["model"]))
        document.model_dump_json()
        timings.append(time.perf_counter() - start)
    return {
        "import_s": imported - started,
        "first_s": timings[0],
        "best_s": min(timings),
        "collectives": len(document.collectives),
        "torch_imported": "torch" in sys.modules,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure_import_torch() -> dict:
    started = time.perf_counter()
    import torch  # noqa: F401

    return {
        "import_s": time.perf_counter() - started,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


CASES = {"hybrid-70b": lambda: measure_plan(HYBRID_70B), "seed-mlp": lambda: measure_plan(SEED_MLP),
         "import-torch": measure_import_torch}  # fmt: skip


def run_case(name: str) -> dict:
    output = subprocess.run([sys.executable, __file__, name], check=True, capture_output=True, text=True).stdout
    return json.loads(output)


def main() -> None:
    if len(sys.argv) == 2:
        print(json.dumps(CASES[sys.argv[1]]()))
        return
    hybrid, seed, bare_torch = run_case("hybrid-70b"), run_case("seed-mlp"), run_case("import-torch")
    print("plan llama-3-70b framework hybrid tp8 pp8 dp16 seq 8192 micro-batch 1")
    print(f"  import          {hybrid['import_s']:.3f} s")
    print(f"  first plan      {hybrid['first_s'] * 1000:.1f} ms   (target < 1000 ms)")
    print(f"  best of {REPEATS}       {hybrid['best_s'] * 1000:.1f} ms   ({hybrid['collectives']} collectives)")
    print(
        f"  peak RSS        {hybrid['peak_rss_mb']:.0f} MB (target < 600 MB; torch loaded: {hybrid['torch_imported']})"
    )
    print("baseline: seed MLP tutorial data plan")
    print(f"  first plan      {seed['first_s'] * 1000:.1f} ms   peak RSS {seed['peak_rss_mb']:.0f} MB")
    print(f"baseline: bare `import torch`: {bare_torch['import_s']:.3f} s, peak RSS {bare_torch['peak_rss_mb']:.0f} MB")
    print(f"ratio 70B / seed plan time (best): {hybrid['best_s'] / seed['best_s']:.2f}x")
    print(f"ratio 70B plan peak RSS / bare import torch RSS: {hybrid['peak_rss_mb'] / bare_torch['peak_rss_mb']:.2f}x")
    if hybrid["first_s"] >= 1.0 or hybrid["peak_rss_mb"] >= 600:
        sys.exit("target missed")


if __name__ == "__main__":
    main()
