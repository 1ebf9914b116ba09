"""Runs uploaded PyTorch source in a short-lived bubblewrap sandbox and reads back its JSON answer.

The sandboxed process sees only a read-only system (/usr), the Python installation and the virtual
environment, the worker script, a fresh /proc and /dev, and two small size-capped tmpfs mounts, /tmp and
/dev/shm; everything else, the sandbox's own root included, is read-only. It has no network (its own
empty network namespace), its own user, PID, IPC, UTS and cgroup namespaces, may create no further user
namespace, and has no capabilities: an empty bounding set. bwrap itself runs unprivileged: started as
root, the server first drops to an unprivileged uid picked at random per run from a range no account
uses, so nothing on the host belongs to it. Limits are set inside the sandbox's user namespace, where
the kernel counts processes per namespace, so each run has its own process budget whichever uid the
server runs as. CPU time, address space, file size, open files and processes are capped with rlimits;
the seccomp filter of ``syscall_filter``, an allow list, keeps the model one process holding no memory
outside its address space, so the address-space limit and the tmpfs sizes cap all the memory it can
hold, and ends the whole process at any call off the list. A wall-clock timeout kills the whole process
group, and ``--die-with-parent`` takes the sandbox down with it. The request goes in on stdin and the
answer comes back on stdout, both as JSON: nothing is ever unpickled.
"""

import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from emuplan import json_input
from emuplan.errors import EmuplanError
from emuplan.sandbox.syscall_filter import filter_program

WORKER = Path(__file__).with_name("worker.py")
SANDBOX_WORKER = "/sandbox/worker.py"
# Unprivileged uids far above the ones Debian hands out; nothing on the host is owned by them.
SANDBOX_UID_BASE = 200_000
SANDBOX_UID_COUNT = 100_000
# Answers are small (shapes and byte counts); anything bigger is not an answer.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
STDERR_TAIL_BYTES = 4000


class SandboxError(ValueError):
    """The model could not be read: its own error, or a limit of the sandbox stopped it."""

    def __init__(self, kind: str, message: str, line: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line


# What a refused run is told to wait: a model's inventory takes seconds; a capture of a large model up to the
# timeout.
RETRY_AFTER_S = 10


class SandboxUnavailable(EmuplanError, SandboxError):
    """bubblewrap is missing and the operator has not allowed unsandboxed runs, or every slot is busy."""

    http_status = 503


class SandboxBusy(SandboxUnavailable):
    """Every slot is taken: try again after ``RETRY_AFTER_S`` (HTTP 503 with Retry-After)."""

    retry_after_s = RETRY_AFTER_S


# Each run may use EMUPLAN_SANDBOX_MEMORY_MB and a CPU core, so at most this many run at once. A run
# that finds no free slot is refused at once: waiting would hold one of the server's worker threads,
# and a burst of uploads then stalled every page, health check included.
MAX_CONCURRENT_RUNS = 2
_run_slots = threading.BoundedSemaphore(MAX_CONCURRENT_RUNS)


@dataclass(frozen=True)
class SandboxPolicy:
    """How uploaded Python may run: its limits, and whether a missing bwrap is acceptable."""

    timeout_s: float = 60.0
    memory_mb: int = 4096
    max_processes: int = 16  # threads count too; the worker runs torch with at most two intra-op threads
    max_file_mb: int = 64
    tmp_mb: int = 64  # the size of each writable tmpfs, /tmp and /dev/shm
    max_open_files: int = 256  # also bounds the pipes, whose buffers are memory outside the address space
    cpu_s: float | None = None  # CPU seconds; unset: one more than the wall-clock timeout, a backstop
    allow_unsandboxed: bool = False  # EMUPLAN_SANDBOX_ALLOW_UNSANDBOXED: trusted users only
    uid: int | None = None  # the uid to run as (when started as root); None: a fresh random one per run

    @property
    def cpu_seconds(self) -> int:
        # By default the wall clock decides, with a clear message; the CPU limit still stops a process
        # that outlives it (a server that died without killing the sandbox).
        return max(1, math.ceil(self.cpu_s if self.cpu_s is not None else self.timeout_s + 1))

    @classmethod
    def from_settings(cls, settings) -> "SandboxPolicy":
        return cls(
            timeout_s=settings.sandbox_timeout_s,
            memory_mb=settings.sandbox_memory_mb,
            allow_unsandboxed=settings.sandbox_allow_unsandboxed,
        )


def _rlimit_arguments(policy: SandboxPolicy) -> list[str]:
    cpu_seconds = policy.cpu_seconds
    return [
        "prlimit",
        f"--as={policy.memory_mb * 1024 * 1024}",
        # The soft limit sends SIGXCPU, the hard one SIGKILL a moment later.
        f"--cpu={cpu_seconds}:{cpu_seconds + 2}",
        f"--nproc={policy.max_processes}",
        f"--fsize={policy.max_file_mb * 1024 * 1024}",
        f"--nofile={policy.max_open_files}",
        "--msgqueue=0",  # POSIX message queues hold memory outside the address space
        "--core=0",
        "--",
    ]


def _read_only_directories() -> list[Path]:
    """The Python installation and the virtual environment, unless /usr already holds them."""
    directories = []
    for prefix in (sys.base_prefix, sys.prefix):
        path = Path(prefix).resolve()
        if path != Path("/usr") and Path("/usr") not in path.parents and path not in directories:
            directories.append(path)
    return directories


def sandbox_python() -> str:
    """The interpreter as the sandbox reaches it: inside the virtual environment's real directory, which
    is what the sandbox binds, since a venv reached through a symlink (a worktree's ``.venv``) is not
    there under its linked name, and Python finds its venv from the path it is started by."""
    executable = Path(sys.executable)
    try:
        return str(Path(sys.prefix).resolve() / executable.relative_to(sys.prefix))
    except ValueError:  # not inside the prefix: an interpreter of the system itself
        return str(executable.resolve())


def _parents_with_permissions(path: Path, created: set[Path]) -> list[str]:
    """bwrap makes missing parents mode 0700; the sandbox's unprivileged uid needs to walk through them."""
    arguments = []
    for parent in reversed(path.parents):
        if parent == Path("/") or parent in created:
            continue
        created.add(parent)
        arguments += ["--perms", "0755", "--dir", str(parent)]
    return arguments


def _namespaces_and_user(policy: SandboxPolicy) -> tuple[list[str], list[str]]:
    """bwrap's namespace options, and what runs inside before the limits: as root, the switch to the
    sandbox's own uid; otherwise nothing, since bwrap already runs as the server's unprivileged user."""
    if os.geteuid() != 0:
        # Unprivileged, bwrap builds the sandbox in a user namespace of its own, which lets it forbid more.
        return ["--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"], []
    uid = policy.uid if policy.uid is not None else SANDBOX_UID_BASE + secrets.randbelow(SANDBOX_UID_COUNT)
    # fmt: off
    # As root, no user namespace: it could map only uid 0, and a real unprivileged uid is what keeps host
    # files out of reach and gives each run its own process count. bwrap keeps only what setpriv needs
    # to change uid and to empty the bounding set (without CAP_SETPCAP setpriv leaves it full, silently);
    # setpriv then drops every capability for good. (Root mode cannot add --disable-userns: the seccomp
    # filter refuses unshare() and setns() instead.)
    namespaces = [
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
    ]
    switch_user = [
        "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
    ]
    # fmt: on
    return namespaces, switch_user


def bwrap_command(policy: SandboxPolicy, seccomp_fd: int) -> list[str]:
    """The sandbox around the worker; ``seccomp_fd`` is an open file holding ``syscall_filter.filter_program()``."""
    namespaces, switch_user = _namespaces_and_user(policy)
    tmpfs_bytes = str(policy.tmp_mb * 1024 * 1024)
    # fmt: off
    command = [
        "bwrap", *namespaces,
        "--die-with-parent",
        "--new-session",
        "--seccomp", str(seccomp_fd),
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/bin", "/bin",
        "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64",
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", tmpfs_bytes, "--perms", "1777", "--tmpfs", "/dev/shm",
        "--size", tmpfs_bytes, "--perms", "1777", "--tmpfs", "/tmp",
    ]
    # Bound after the tmpfs mounts, so that a virtual environment under /tmp is not hidden by the fresh one.
    created = {Path("/tmp")}
    for directory in _read_only_directories():
        command += _parents_with_permissions(directory, created)
        command += ["--ro-bind", str(directory), str(directory)]
    command += [
        "--perms", "0755", "--dir", "/sandbox",
        "--ro-bind", str(WORKER), SANDBOX_WORKER,
        # Run unprivileged, bwrap builds / and /dev as tmpfs mounts the model's uid owns: read-only,
        # they hold nothing.
        "--remount-ro", "/dev",
        "--remount-ro", "/",
        "--chdir", "/tmp",
        "--clearenv",
        "--setenv", "HOME", "/tmp",
        "--setenv", "TMPDIR", "/tmp",
        "--setenv", "PATH", "/usr/bin",
        "--",
    ]
    # fmt: on
    # The limits are set inside the sandbox: in a user namespace the kernel counts processes per
    # namespace, so the server user's own processes do not use up the sandbox's budget.
    return command + switch_user + _rlimit_arguments(policy) + [sandbox_python(), "-I", "-B", SANDBOX_WORKER]


def unsandboxed_command() -> list[str]:
    return [sys.executable, "-I", "-B", str(WORKER)]


def sandbox_command(policy: SandboxPolicy, seccomp_fd: int) -> list[str]:
    if shutil.which("bwrap") is not None:
        return bwrap_command(policy, seccomp_fd)
    if policy.allow_unsandboxed:
        return _rlimit_arguments(policy) + unsandboxed_command()
    raise SandboxUnavailable(
        "sandbox_unavailable",
        "PyTorch source uploads need bubblewrap (Debian package 'bubblewrap'), which is not installed; "
        "upload a safetensors header, an ONNX file or a config.json instead, or have the operator install "
        "bubblewrap (EMUPLAN_SANDBOX_ALLOW_UNSANDBOXED=true runs uploads without it: trusted users only).",
    )


def _tail(stream, limit: int = STDERR_TAIL_BYTES) -> str:
    stream.seek(0, os.SEEK_END)
    size = stream.tell()
    stream.seek(max(0, size - limit))
    return stream.read().decode("utf-8", "replace").strip()


def _stopped_by_signal(returncode: int) -> int | None:
    if returncode < 0:
        return -returncode
    if returncode > 128:  # bwrap reports a child killed by a signal as 128 + signal
        return returncode - 128
    return None


def _limit_message(signal_number: int, policy: SandboxPolicy, stderr: str) -> SandboxError:
    if signal_number == signal.SIGXCPU:
        return SandboxError("cpu_limit", f"the model used more than {policy.cpu_seconds} s of CPU time")
    if signal_number == signal.SIGXFSZ:
        return SandboxError("file_limit", f"the model wrote a file larger than {policy.max_file_mb} MB")
    if signal_number == signal.SIGSYS:
        return SandboxError(
            "forbidden_syscall",
            "the model made a system call outside the sandbox's allow list (such as io_uring, kernel keyrings, "
            "mounts, tracing or another architecture's calls), and the sandbox ended its process",
        )
    detail = f": {stderr.splitlines()[-1]}" if stderr else ""
    return SandboxError(
        "killed",
        f"the sandboxed model process was killed by signal {signal.Signals(signal_number).name}"
        f" (memory limit {policy.memory_mb} MB){detail}",
    )


def run_in_sandbox(request: dict, policy: SandboxPolicy) -> dict:
    """Runs the worker on ``request`` and returns its answer; raises SandboxError when it fails."""
    with seccomp_program() as seccomp_fd:
        command = sandbox_command(policy, seccomp_fd)
        if not _run_slots.acquire(blocking=False):
            raise SandboxBusy(
                "busy", f"{MAX_CONCURRENT_RUNS} model runs are already in progress; try again in {RETRY_AFTER_S} s"
            )
        try:
            return _run(command, request, policy, seccomp_fd)
        finally:
            _run_slots.release()


@contextmanager
def seccomp_program() -> Iterator[int]:
    """An open file holding the seccomp filter, for ``bwrap --seccomp``, which reads it to the end."""
    try:
        program_bytes = filter_program()
    except (OSError, RuntimeError) as error:  # pyseccomp's words for a libseccomp it cannot find or load
        raise SandboxUnavailable(
            "sandbox_unavailable",
            f"PyTorch source uploads need libseccomp (Debian package 'libseccomp2') for the sandbox's system-call "
            f"filter, and it could not be loaded ({error}); upload a safetensors header, an ONNX file or a "
            "config.json instead, or have the operator install libseccomp2",
        ) from error
    with tempfile.TemporaryFile() as program:
        program.write(program_bytes)
        program.flush()
        program.seek(0)
        yield program.fileno()


def _run(command: list[str], request: dict, policy: SandboxPolicy, seccomp_fd: int) -> dict:
    with (
        tempfile.TemporaryFile() as stdin,
        tempfile.TemporaryFile() as stdout,
        tempfile.TemporaryFile() as stderr,
    ):
        stdin.write(json.dumps(request).encode())
        stdin.seek(0)
        process = subprocess.Popen(
            command, stdin=stdin, stdout=stdout, stderr=stderr, start_new_session=True, pass_fds=(seccomp_fd,)
        )
        try:
            returncode = process.wait(timeout=policy.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise SandboxError(
                "time_limit", f"the model did not finish within the time limit of {policy.timeout_s:g} s"
            ) from None
        stopped_by = _stopped_by_signal(returncode)
        if stopped_by is not None:
            raise _limit_message(stopped_by, policy, _tail(stderr))
        # Read from the start and never past the cap: the file's offset is shared with the sandboxed
        # process, which can move it (63 MiB written, then lseek to 0, passed a check of the offset).
        raw = os.pread(stdout.fileno(), MAX_ANSWER_BYTES + 1, 0)
        if len(raw) > MAX_ANSWER_BYTES:
            raise SandboxError("bad_answer", f"the sandbox answered with more than {MAX_ANSWER_BYTES} bytes")
        try:
            answer = json_input.loads(raw)
        except ValueError:
            raise SandboxError(
                "bad_answer", f"the sandbox gave no answer (exit code {returncode}): {_tail(stderr) or 'no output'}"
            ) from None
    if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
        raise SandboxError("bad_answer", "the sandbox's answer is not the expected JSON document")
    if not answer["ok"]:
        error = answer.get("error") or {}
        line = error.get("line")
        raise SandboxError(
            str(error.get("kind", "failed")),
            str(error.get("message", "the model failed")),
            line if isinstance(line, int) else None,
        )
    return answer
