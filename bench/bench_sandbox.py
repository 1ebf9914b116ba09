"""Planning from PyTorch source through the bubblewrap sandbox: time and the sandboxed process's peak RSS.

Targets: the seeds' Classifier planned from source in < 6 s (torch import in the sandbox included);
a GPT-2-sized source (124M parameters, read under FakeTensorMode) in < 20 s with the sandboxed
process's peak RSS < 1.5 GB. Baseline measured in the same run, in the same sandbox: a bare
``python -c "import torch"``. Each case is run REPEATS times; the median is reported.

    .venv/bin/python bench/bench_sandbox.py
"""

import statistics
import subprocess
import sys
import time
from pathlib import Path

from emuplan.sandbox.runner import SandboxPolicy, run_in_sandbox, sandbox_command
from emuplan.workload.document import PlanRequest
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.planner import plan_workload
from emuplan.workload.pytorch_source import PytorchSourceOptions, _captured_once, capture_for_plan

REPEATS = 3
MODELS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "models"
POLICY = SandboxPolicy(timeout_s=120)
BARE_IMPORT = (
    "import resource, time; started = time.perf_counter(); import torch; "
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"
)
SEED = ("seed_classifier.py", PytorchSourceOptions(model_class="Classifier", input_shape=[1, 28, 28]))
GPT2 = ("gpt2.py", PytorchSourceOptions(model_class="GPT2", input_shape=[1024], input_dtype="int64"))


def bare_import_torch() -> tuple[float, int]:
    command = sandbox_command(POLICY)[:-1] + ["-c", BARE_IMPORT]  # the sandbox, with python's script swapped
    started = time.perf_counter()
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - started, int(output)


def inventory_and_plan(model: tuple[str, PytorchSourceOptions], request: PlanRequest):
    file_name, options = model
    answer = run_in_sandbox({"source": (MODELS / file_name).read_text(), "file_name": file_name,
                             **options.model_dump()}, POLICY)  # fmt: skip
    return plan_workload(request, ModelInventory.model_validate(answer["inventory"])), answer["peak_rss_bytes"]


def plan_from_source(model: tuple[str, PytorchSourceOptions], request: PlanRequest) -> tuple[float, int]:
    started = time.perf_counter()
    _, peak_rss = inventory_and_plan(model, request)
    return time.perf_counter() - started, peak_rss


def plan_with_capture(model: tuple[str, PytorchSourceOptions], request: PlanRequest) -> tuple[float, int]:
    """Inventory, plan, then the capture on 4 ranks: the CLI's framework path, two sandbox runs."""
    file_name, options = model
    _captured_once.cache_clear()  # measure the sandbox run, not the cache
    started = time.perf_counter()
    document, peak_rss = inventory_and_plan(model, request)
    document = capture_for_plan(document, (MODELS / file_name).read_text(), file_name, options, POLICY)
    if not document.captured:
        sys.exit(f"capture failed: {document.notes[-1]}")
    return time.perf_counter() - started, peak_rss


def median_of(measure) -> tuple[float, int]:
    runs = [measure() for _ in range(REPEATS)]
    return statistics.median(seconds for seconds, _ in runs), max(rss for _, rss in runs)


def main() -> None:
    seed_request = PlanRequest(model="seed", strategy="data", mode="tutorial")
    gpt2_request = PlanRequest(model="gpt2", strategy="data", mode="framework", gpus=8, batch_size=64)
    fsdp2_request = PlanRequest(model="seed", strategy="data", mode="framework", dp_impl="fsdp2")

    bare_s, bare_rss = median_of(bare_import_torch)
    seed_s, seed_rss = median_of(lambda: plan_from_source(SEED, seed_request))
    gpt2_s, gpt2_rss = median_of(lambda: plan_from_source(GPT2, gpt2_request))
    capture_s, _ = median_of(lambda: plan_with_capture(SEED, fsdp2_request))
    # DDP's capture computes three real training steps; once is enough to see what that costs at 124M.
    gpt2_ddp_s, _ = plan_with_capture(GPT2, PlanRequest(model="gpt2", strategy="data", mode="framework", gpus=4))

    mb = 1024 * 1024
    print(f"sandbox: {' '.join(sandbox_command(POLICY)[:3])} ... (median of {REPEATS})")
    print(f"baseline: bare `import torch` in the sandbox      {bare_s:6.2f} s   peak RSS {bare_rss / mb:6.0f} MB")
    print(f"seed Classifier from source, planned             {seed_s:6.2f} s   peak RSS {seed_rss / mb:6.0f} MB"
          f"   (target < 6 s)   {seed_s / bare_s:.2f}x baseline")  # fmt: skip
    print(f"GPT-2 (124M) from source, planned                {gpt2_s:6.2f} s   peak RSS {gpt2_rss / mb:6.0f} MB"
          f"   (target < 20 s, < 1536 MB)   {gpt2_s / bare_s:.2f}x baseline,"
          f" RSS {gpt2_rss / bare_rss:.2f}x")  # fmt: skip
    print(f"seed Classifier, framework FSDP2 with capture    {capture_s:6.2f} s"
          f"   (inventory run + capture run)   {capture_s / bare_s:.2f}x baseline")  # fmt: skip
    print(f"GPT-2 (124M), framework DDP with capture         {gpt2_ddp_s:6.2f} s"
          f"   (inventory run + 3 real DDP steps, once)   {gpt2_ddp_s / bare_s:.2f}x baseline")  # fmt: skip
    if seed_s >= 6 or gpt2_s >= 20 or gpt2_rss >= 1536 * mb:
        sys.exit("target missed")


if __name__ == "__main__":
    main()
