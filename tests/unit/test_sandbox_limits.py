"""The bubblewrap sandbox's limits, seen from the runner: what is left running after a kill, the CPU
limit, the writable /tmp, and what happens without bwrap. tests/api/test_models.py sends every hostile
model through the API."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from emuplan.sandbox import runner
from emuplan.sandbox.runner import SandboxError, SandboxPolicy, SandboxUnavailable, run_in_sandbox
from paths import MODELS

pytestmark = pytest.mark.sandbox

# Generous: the limit tests below set their own; others only must not hit it on a loaded machine.
LIMITS = SandboxPolicy(timeout_s=60, memory_mb=4096)


def request_for(fixture: str, model_class: str = "Model", input_shape=(4,)) -> dict:
    return {
        "source": (MODELS / fixture).read_text(),
        "file_name": fixture,
        "model_class": model_class,
        "model_kwargs": {},
        "input_shape": list(input_shape),
    }


def failure(fixture: str, limits: SandboxPolicy = LIMITS) -> SandboxError:
    with pytest.raises(SandboxError) as caught:
        run_in_sandbox(request_for(fixture), limits)
    return caught.value


def processes_of(uid: int) -> list[str]:
    """The sandbox's processes still alive; SIGKILL through --die-with-parent takes a few ms to land."""
    deadline = time.monotonic() + 3
    while True:
        listing = subprocess.run(["ps", "-o", "args=", "-u", str(uid)], capture_output=True, text=True).stdout
        if not listing.strip() or time.monotonic() > deadline:
            return listing.splitlines()
        time.sleep(0.1)


def test_the_seed_classifier_runs_in_the_sandbox():
    answer = run_in_sandbox(request_for("seed_classifier.py", "Classifier", (1, 28, 28)), LIMITS)
    assert [p["name"] for p in answer["inventory"]["parameters"]][:2] == ["fc1.weight", "fc1.bias"]


def test_an_endless_loop_is_killed_at_the_wall_clock_limit_with_its_whole_process_tree():
    error = failure("hostile_infinite_loop.py", SandboxPolicy(timeout_s=5, uid=250_001))
    assert error.kind == "time_limit"
    assert error.message == "the model did not finish within the time limit of 5 s"
    assert processes_of(250_001) == []


def test_the_cpu_time_limit_stops_a_busy_model_before_the_clock_limit():
    error = failure("hostile_infinite_loop.py", SandboxPolicy(timeout_s=20, cpu_s=3))
    assert error.kind == "cpu_limit"
    assert error.message == "the model used more than 3 s of CPU time"


def test_a_fork_bomb_hits_the_process_limit():
    error = failure("hostile_fork_bomb.py", SandboxPolicy(timeout_s=60, uid=250_002))
    assert error.kind == "import_failed"
    assert "the sandbox's process limit was reached" in error.message
    assert processes_of(250_002) == []


def test_the_private_tmp_is_writable_but_the_system_is_read_only(tmp_path: Path):
    source = (
        "from torch import nn\n"
        "open('/tmp/scratch', 'w').write('fine')\n"
        "open('/usr/escaped', 'w')\n"
        "class Model(nn.Module):\n    pass\n"
    )
    with pytest.raises(SandboxError) as caught:
        run_in_sandbox({**request_for("hostile_write_outside.py"), "source": source}, LIMITS)
    assert caught.value.line == 3
    assert "OSError: [Errno 30] Read-only file system: '/usr/escaped'" in caught.value.message


def test_without_bubblewrap_python_uploads_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no bwrap
    with pytest.raises(SandboxUnavailable) as caught:
        run_in_sandbox(request_for("seed_classifier.py", "Classifier", (1, 28, 28)), LIMITS)
    assert "need bubblewrap (Debian package 'bubblewrap'), which is not installed" in caught.value.message


def test_the_operator_can_allow_unsandboxed_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    os.symlink("/usr/bin/prlimit", tmp_path / "prlimit")
    monkeypatch.setenv("PATH", str(tmp_path))
    policy = SandboxPolicy(timeout_s=60, allow_unsandboxed=True)
    answer = run_in_sandbox(request_for("seed_classifier.py", "Classifier", (1, 28, 28)), policy)
    assert len(answer["inventory"]["parameters"]) == 8


def test_a_burst_of_runs_waits_for_a_free_slot_and_then_is_told_to_retry():
    for _ in range(runner.MAX_CONCURRENT_RUNS):
        runner._run_slots.acquire()
    try:
        with pytest.raises(SandboxUnavailable) as caught:
            run_in_sandbox(request_for("seed_classifier.py", "Classifier", (1, 28, 28)), SandboxPolicy(timeout_s=0.5))
    finally:
        for _ in range(runner.MAX_CONCURRENT_RUNS):
            runner._run_slots.release()
    assert caught.value.message == "2 model runs are already in progress; try again in a moment"
