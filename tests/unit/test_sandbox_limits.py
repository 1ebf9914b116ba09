"""The bubblewrap sandbox's limits, seen from the runner: what is left running after a kill, the CPU
limit, the size-capped tmpfs mounts, the system calls the seccomp filter refuses, the capabilities
and namespaces left to the model, as root and as an unprivileged server user, and what happens
without bwrap. tests/api/test_models.py sends every hostile model through the API."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emuplan.sandbox import runner
from emuplan.sandbox.runner import SandboxError, SandboxPolicy, SandboxUnavailable, run_in_sandbox
from emuplan.sandbox.worker import REFUSED_BY_THE_SANDBOX
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


def model_failure(source: str, limits: SandboxPolicy = LIMITS) -> SandboxError:
    """What the sandbox says about a model whose module runs ``source`` (line 1 is ``source``'s first)."""
    with pytest.raises(SandboxError) as caught:
        request = {"source": source + "\nclass Model:\n    pass\n", "file_name": "model.py", "model_class": "Model",
                   "model_kwargs": {}, "input_shape": [4]}  # fmt: skip
        run_in_sandbox(request, limits)
    return caught.value


REFUSED = f"PermissionError: [Errno 1] Operation not permitted ({REFUSED_BY_THE_SANDBOX})"


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


def test_a_fork_bomb_cannot_start_a_single_process():
    error = failure("hostile_fork_bomb.py", SandboxPolicy(timeout_s=60, uid=250_002))
    assert (error.kind, error.line) == ("import_failed", 8)
    assert error.message == f"hostile_fork_bomb.py, line 8: running the module failed: {REFUSED}"
    assert processes_of(250_002) == []


def test_the_process_limit_caps_threads():
    source = "import threading, time\nfor _ in range(64):\n    threading.Thread(target=time.sleep, args=(5,)).start()"
    error = model_failure(source)
    assert error.message == "model.py, line 3: running the module failed: RuntimeError: can't start new thread"


@pytest.mark.parametrize(
    ("source", "line"),
    [
        # 5 GiB, past the 4 GiB address-space limit, in memory no mapping would count.
        ("import os\nhoard = os.memfd_create('hoard')\nfor _ in range(5 * 1024):\n"
         "    os.write(hoard, bytes(1 << 20))", 2),
        ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nsegment = libc.shmget(0, 1 << 30, 0o1600)\n"
         "if segment < 0:\n    raise OSError(ctypes.get_errno(), 'Operation not permitted')", 5),
        ("import os\nos.fork()", 2),
        ("import subprocess\nsubprocess.run(['/usr/bin/true'])", 2),
        ("import socket\nsocket.socketpair()", 2),
        ("import fcntl, os\nread, write = os.pipe()\nfcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 1 << 20)", 3),
        ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nCLONE_NEWUSER = 0x10000000\n"
         "if libc.unshare(CLONE_NEWUSER) != 0:\n    raise OSError(ctypes.get_errno(), 'Operation not permitted')", 5),
    ],
    ids=["memfd past the memory limit", "SysV shared memory", "fork", "subprocess", "socketpair",
         "a pipe's buffer grown to 1 MiB", "nested user namespace"],
)  # fmt: skip
def test_the_seccomp_filter_refuses_processes_namespaces_and_memory_outside_the_limit(source: str, line: int):
    error = model_failure(source)
    assert (error.kind, error.line) == ("import_failed", line)
    assert error.message == f"model.py, line {line}: running the module failed: {REFUSED}"


def syscall_number(name: str) -> int:
    import pyseccomp

    return pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)


# Each calls the kernel directly (as model code can through ctypes) and, if the call was let through,
# says what it got: an io_uring (whose IORING_OP_SOCKET makes the sockets socket() may not), a key left
# in the kernel's keyrings after the run.
OFF_THE_LIST = {
    "io_uring_setup": "params = ctypes.create_string_buffer(120)\nresult = libc.syscall({number}, 8, params)",
    "io_uring_enter": "result = libc.syscall({number}, 0, 1, 0, 0, None, 0)",
    "io_uring_register": "result = libc.syscall({number}, 0, 0, None, 0)",
    "add_key": "result = libc.syscall({number}, b'user', b'planted', b'secret', 6, -3)",  # the session keyring
    "request_key": "result = libc.syscall({number}, b'user', b'planted', None, -3)",
    "keyctl": "result = libc.syscall({number}, 0, -3, 0)",  # KEYCTL_GET_KEYRING_ID of the session keyring
}


@pytest.mark.parametrize("call", list(OFF_THE_LIST))
def test_a_system_call_off_the_allow_list_ends_the_model_process(call: str):
    source = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        + OFF_THE_LIST[call].format(number=syscall_number(call))
        + "\nraise ValueError(('let through', result, ctypes.get_errno()))"
    )
    error = model_failure(source)
    assert error.kind == "forbidden_syscall", error.message
    assert error.message == (
        "the model made a system call outside the sandbox's allow list (such as io_uring, kernel keyrings, "
        "mounts, tracing or another architecture's calls), and the sandbox ended its process"
    )


@pytest.mark.parametrize(
    "source",
    [
        # x32 getpid from the main thread while another thread sleeps: killing only the calling thread
        # left the process running until the wall-clock limit.
        "import ctypes, threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "ctypes.CDLL(None).syscall(0x40000000 | 39)\nraise ValueError('still running')",
        # io_uring_setup from a thread while the main thread sleeps.
        "import ctypes, threading, time\n"
        "threading.Thread(target=ctypes.CDLL(None).syscall, args=({io_uring_setup}, 8, "
        "ctypes.create_string_buffer(120))).start()\ntime.sleep(60)",
    ],
    ids=["x32 call", "io_uring from a thread"],
)
def test_a_violation_by_any_thread_kills_the_whole_process_at_once(source: str):
    if "0x40000000" in source and os.uname().machine != "x86_64":
        pytest.skip("the x32 ABI exists only on x86_64")
    started = time.monotonic()
    error = model_failure(
        source.format(io_uring_setup=syscall_number("io_uring_setup")), SandboxPolicy(timeout_s=20, uid=250_005)
    )
    assert error.kind == "forbidden_syscall", error.message
    assert time.monotonic() - started < 15
    assert processes_of(250_005) == []


def test_an_answer_past_the_cap_is_refused_even_when_the_writer_rewinds():
    """63 MiB written to the answer descriptor, then its offset (shared with the server's file) moved back to
    0: the server reads from the start up to the cap, whatever the offset says."""
    source = (
        'import os\nos.write(3, b\'{"ok": false, "error": {"kind": "planted", "message": "\' '
        "+ bytes(63 << 20).replace(b'\\0', b'a') + b'\"}}')\nos.lseek(3, 0, os.SEEK_SET)\nos._exit(0)"
    )
    error = model_failure(source)
    assert (error.kind, error.message) == ("bad_answer", "the sandbox answered with more than 33554432 bytes")


def test_unshare_cannot_make_a_nested_user_namespace():
    """``unshare -Ur`` replaces the worker (a new process would be refused), and fails."""
    error = model_failure("import os\nos.execv('/usr/bin/unshare', ['unshare', '-Ur', 'id'])")
    assert error.kind == "bad_answer"
    assert error.message == "the sandbox gave no answer (exit code 1): unshare: unshare failed: Operation not permitted"


# The uid, the bounding and effective capability sets, no_new_privs, the seccomp mode, and the errno
# of an attempt to make a user namespace.
STATUS_SOURCE = (
    "import ctypes\n"
    "status = dict(line.split(':\\t') for line in open('/proc/self/status').read().splitlines())\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "unshare = ctypes.get_errno() if libc.unshare(0x10000000) else 0\n"
    "raise ValueError([status['Uid'].split()[0], status['CapBnd'], status['CapEff'], status['NoNewPrivs'], "
    "status['Seccomp'], unshare])"
)


def test_as_root_the_model_runs_as_its_own_uid_with_no_capabilities():
    error = model_failure(STATUS_SOURCE, SandboxPolicy(timeout_s=60, uid=250_003))
    assert error.message == (
        "model.py, line 5: running the module failed: ValueError: ['250003', '0000000000000000', "
        "'0000000000000000', '1', '2', 1]"
    )


UNPRIVILEGED_SERVER = """
import json, sys
from emuplan.sandbox.runner import SandboxError, SandboxPolicy, run_in_sandbox
try:
    run_in_sandbox(json.loads(sys.argv[1]), SandboxPolicy(timeout_s=60))
except SandboxError as error:
    print(error.message)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="switching the server to another uid needs root")
def test_a_server_running_as_an_unprivileged_user_gets_the_same_sandbox():
    """bwrap runs unprivileged, in a user namespace of its own (with --disable-userns behind the
    seccomp filter); the Python installation is bound where that user can reach it, as a deployment
    would install it."""
    request = {"source": STATUS_SOURCE + "\nclass Model:\n    pass\n", "file_name": "model.py",
               "model_class": "Model", "model_kwargs": {}, "input_shape": [4]}  # fmt: skip
    reachable, created = ["--dev-bind", "/", "/", "--tmpfs", "/root"], set()
    for directory in runner._read_only_directories():
        reachable += runner._parents_with_permissions(directory, created)
        reachable += ["--ro-bind", str(directory), str(directory)]
    unprivileged = ["setpriv", "--reuid=250004", "--regid=250004", "--clear-groups", "--inh-caps=-all",
                    "--bounding-set=-all"]  # fmt: skip
    server = ["bwrap", *reachable, *unprivileged, sys.executable, "-c", UNPRIVILEGED_SERVER, json.dumps(request)]
    answer = subprocess.run(server, capture_output=True, text=True, check=True, timeout=120)
    assert answer.stdout == (
        "model.py, line 5: running the module failed: ValueError: ['250004', '0000000000000000', "
        "'0000000000000000', '1', '2', 1]\n"
    )


@pytest.mark.parametrize("directory", ["/tmp", "/dev/shm"])
def test_writing_past_the_tmpfs_size_fails(directory: str):
    source = f"hoard = open('{directory}/hoard', 'wb')\nfor _ in range(16):\n    hoard.write(bytes(1 << 20))"
    error = model_failure(source, SandboxPolicy(timeout_s=60, tmp_mb=8))
    assert error.message == "model.py, line 3: running the module failed: OSError: [Errno 28] No space left on device"


@pytest.mark.parametrize("path", ["/usr/escaped", "/escaped", "/dev/escaped", "/sandbox/escaped"])
def test_the_private_tmp_is_writable_but_everything_else_is_read_only(path: str):
    error = model_failure(f"open('/tmp/scratch', 'w').write('fine')\nopen('{path}', 'w')")
    assert error.line == 2
    assert error.message == (
        f"model.py, line 2: running the module failed: OSError: [Errno 30] Read-only file system: '{path}'"
    )


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


def test_a_run_that_finds_every_slot_taken_is_told_to_retry_without_waiting():
    for _ in range(runner.MAX_CONCURRENT_RUNS):
        runner._run_slots.acquire()
    try:
        with pytest.raises(runner.SandboxBusy) as caught:
            run_in_sandbox(request_for("seed_classifier.py", "Classifier", (1, 28, 28)), SandboxPolicy(timeout_s=60))
    finally:
        for _ in range(runner.MAX_CONCURRENT_RUNS):
            runner._run_slots.release()
    assert caught.value.message == "2 model runs are already in progress; try again in 10 s"


def test_a_machine_whose_libseccomp_cannot_be_loaded_refuses_source_runs_as_unavailable() -> None:
    """libseccomp's file emptied (bind-mounted over with /dev/null) for one process: the filter cannot be
    built, and a source run is refused as sandbox_unavailable (HTTP 503) naming the package, not a 500."""
    import pyseccomp  # noqa: F401  (maps libseccomp into this process, so /proc/self/maps names its file)

    maps = Path("/proc/self/maps").read_text().splitlines()
    library = next(line.split()[-1] for line in maps if "/libseccomp.so" in line)
    probe = (
        "from emuplan.sandbox.runner import SandboxUnavailable, seccomp_program\n"
        "try:\n    seccomp_program().__enter__()\n"
        "except SandboxUnavailable as error:\n    print(error.kind, error.message)\n"
    )
    hidden = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", "/dev/null", library, sys.executable, "-c", probe]
    output = subprocess.run(hidden, capture_output=True, text=True, timeout=60, check=True).stdout
    assert output.startswith(
        "sandbox_unavailable PyTorch source uploads need libseccomp (Debian package 'libseccomp2') for the "
        "sandbox's system-call filter, and it could not be loaded ("
    ), output
    assert output.rstrip().endswith("or have the operator install libseccomp2"), output


TMP_VENV_SERVER = """
import json, sys
from emuplan.sandbox.runner import SandboxPolicy, run_in_sandbox
answer = run_in_sandbox(json.loads(sys.argv[1]), SandboxPolicy(timeout_s=60))
print(sys.prefix, [parameter["name"] for parameter in answer["inventory"]["parameters"]])
"""


def test_a_server_whose_virtual_environment_lives_under_tmp_runs_models(tmp_path: Path):
    """The server's own venv bind-mounted under this test's directory in /tmp (a private mount namespace,
    so nothing is copied) and the server started from there: the sandbox's fresh /tmp must not hide it."""
    assert Path("/tmp") in tmp_path.resolve().parents
    venv = tmp_path / "venv"
    venv.mkdir()
    executable = venv / Path(sys.executable).relative_to(sys.prefix)
    request = request_for("seed_classifier.py", "Classifier", (1, 28, 28))
    server = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(Path(sys.prefix).resolve()), str(venv),
              str(executable), "-c", TMP_VENV_SERVER, json.dumps(request)]  # fmt: skip
    backend = Path(runner.__file__).parents[2]
    answer = subprocess.run(
        server, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(backend)}
    )
    assert answer.stdout == f"{venv} ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias', 'fc3.weight', " \
        "'fc3.bias', 'fc4.weight', 'fc4.bias']\n", answer.stderr[-2000:]  # fmt: skip
