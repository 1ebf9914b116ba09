"""The container's seccomp profile (docker/seccomp.json, which docker-compose.yml gives the container): the server
and bubblewrap's model sandbox work under it as the image's unprivileged user, and what no part of emuplan calls
(io_uring, kernel keyrings, BPF, ptrace, …) fails with EPERM. The profile is loaded as Docker loads it — libseccomp,
default action, one rule per name — into a process that then serves real HTTP."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyseccomp as seccomp
import pytest

TESTS = Path(__file__).resolve().parents[1]
PROFILE = TESTS.parent / "docker" / "seccomp.json"
# Calls no part of emuplan makes, each a way out of a container or into the kernel that the audits checked.
NEVER_ALLOWED = {
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key", "bpf",
    "perf_event_open", "ptrace", "process_vm_readv", "process_vm_writev", "userfaultfd", "init_module",
    "finit_module", "delete_module", "kexec_load", "kexec_file_load", "open_by_handle_at", "name_to_handle_at",
    "fsopen", "fsmount", "move_mount", "open_tree", "mount_setattr", "shmget", "personality", "reboot", "swapon",
    "clock_settime", "settimeofday", "sethostname",
}  # fmt: skip

# The child: an unprivileged user as the image's (uid 10001 there; here nobody, in a user namespace of its own, so that
# it still reads the test's Python), the profile loaded, then the app served over HTTP.
UNDER_THE_PROFILE = """
import ctypes, json, os, sys
import httpx2
import pyseccomp as seccomp

profile_path, database_url, model = sys.argv[1:4]
assert os.geteuid() == 65534
profile = json.load(open(profile_path))
assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
loaded = seccomp.SyscallFilter(seccomp.ERRNO(profile["defaultErrnoRet"]))
for rule in profile["syscalls"]:
    action = seccomp.ALLOW if rule["action"] == "SCMP_ACT_ALLOW" else seccomp.ERRNO(rule["errnoRet"])
    for name in rule["names"]:
        loaded.add_rule(action, name)
loaded.load()

libc = ctypes.CDLL(None, use_errno=True)
for name in ("keyctl", "io_uring_setup", "bpf", "ptrace"):
    result = libc.syscall(seccomp.resolve_syscall(seccomp.Arch.NATIVE, name), 0, 0, 0, 0)
    print(name, result, os.strerror(ctypes.get_errno()))

from emuplan.settings import Settings
from job_polling import wait_for
from live_server import start_server, stop_server

live = start_server(Settings(database_url=database_url, demo=False))
csv = b"iteration,size,time_ms,collective\\n" + b"".join(b"%d,1048576,1.5,all_reduce\\n" % i for i in range(20))
run = httpx2.post(f"{live.url}/api/runs", files={"file": ("r.csv", csv)}, data={"tags": "nightly"}, timeout=60)
print("run", run.status_code, run.json().get("sample_count"))
print("metrics", httpx2.get(f"{live.url}/metrics", timeout=60).status_code)
form = {"model_class": "Classifier", "input_shape": "1,28,28", "name": "seed", "model_kwargs": "{}"}
made = httpx2.post(f"{live.url}/api/models", files={"file": ("model.py", open(model, "rb").read())}, data=form,
                   timeout=120)
print("model", made.status_code, made.json().get("parameter_count", made.text))
# A local measurement: torchrun's gloo workers (io_uring, which their libuv tries first, refused).
client = httpx2.Client(base_url=live.url, timeout=60)
plan = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "pipeline"}).json()["id"]
job = client.post(f"/api/plans/{plan}/measure", json={"world_size": 2, "backend": "gloo", "iterations": 3,
                                                        "warmup": 1}).json()
job = wait_for(client, job["id"], ("succeeded", "failed"))
print("measured", job["state"], job.get("error"), client.get(f"/api/runs/{job['run_id']}").json()["origin_detail"])
stop_server(live)
"""


def test_the_profile_names_real_calls_and_none_emuplan_never_makes() -> None:
    profile = json.loads(PROFILE.read_text())
    allowed = {name for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for name in rule["names"]}
    for name in allowed:  # each a call of the architectures the profile names (libseccomp raises otherwise)
        seccomp.resolve_syscall(seccomp.Arch.X86_64, name)
        seccomp.resolve_syscall(seccomp.Arch.AARCH64, name)
    assert allowed & NEVER_ALLOWED == set()
    assert (profile["defaultAction"], profile["defaultErrnoRet"]) == ("SCMP_ACT_ERRNO", 1)
    assert profile["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"]  # no x32, no 32-bit
    assert {"clone", "unshare", "mount", "pivot_root"} <= allowed  # bubblewrap's user namespaces
    compose = (TESTS.parent / "docker-compose.yml").read_text()
    assert "seccomp=./docker/seccomp.json" in compose and "seccomp=unconfined" not in compose
    assert "\nUSER emuplan\n" in (TESTS.parent / "Dockerfile").read_text()


@pytest.mark.sandbox
def test_the_server_and_its_sandbox_work_under_the_profile_as_an_unprivileged_user(tmp_path, database_url) -> None:
    result = subprocess.run(
        ["unshare", "--user", "--map-user=65534", "--map-group=65534", sys.executable, "-c", UNDER_THE_PROFILE,
         str(PROFILE), database_url, str(TESTS / "fixtures" / "models" / "seed_classifier.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path]), "TMPDIR": str(tmp_path),
             "HOME": str(tmp_path)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [
        line
        for line in result.stdout.splitlines()
        if line.split(" ")[0] in {"keyctl", "io_uring_setup", "bpf", "ptrace", "run", "metrics", "model", "measured"}
    ]
    *lines, measured = lines
    assert lines == [
        "keyctl -1 Operation not permitted",
        "io_uring_setup -1 Operation not permitted",
        "bpf -1 Operation not permitted",
        "ptrace -1 Operation not permitted",
        "run 201 20",
        "metrics 200",
        "model 201 242762",
    ]
    assert measured.startswith("measured succeeded None measured locally (gloo, world size 2, host "), measured
