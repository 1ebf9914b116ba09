"""The seccomp filter bwrap installs on the sandboxed model process (``bwrap --seccomp FD``).

RLIMIT_AS caps one process's address space. Memory can still be held outside it, and processes
multiply it, so the filter refuses exactly those ways out: a new process (each
would get its own address-space limit; threads share their process's), memory that lives without a
mapping (memfd, SysV shared memory segments, which outlive their detach) and sockets (their buffers
hold data no address space counts; the sandbox has no network to reach anyway). Files are bounded by
the size-capped tmpfs mounts. It also refuses entering or creating namespaces: a new user namespace
would give the model every capability inside it. Everything else is allowed: this is a targeted
deny list, not a general system-call allow list.
"""

import errno
import tempfile
from functools import cache

CLONE_THREAD = 0x00010000
HOLD_MEMORY_OUTSIDE_THE_ADDRESS_SPACE = ("memfd_create", "memfd_secret", "shmget", "socket", "socketpair")
START_PROCESSES = ("fork", "vfork")
# A new user namespace would give the model every capability inside it (and with it mounts).
ENTER_NAMESPACES = ("unshare", "setns")


@cache
def filter_program() -> bytes:
    """The BPF program for this machine's architecture; any other architecture's calls kill the process
    (libseccomp's default), so 32-bit system calls cannot get around the filter."""
    # Loading libseccomp asks ldconfig where it is: only when a sandbox starts, not for every command.
    import pyseccomp as seccomp

    # A refused call fails with EPERM, which the worker reports as refused by the sandbox.
    refused = seccomp.ERRNO(errno.EPERM)
    syscall_filter = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in HOLD_MEMORY_OUTSIDE_THE_ADDRESS_SPACE + START_PROCESSES + ENTER_NAMESPACES:
        syscall_filter.add_rule(refused, name)
    # clone() starts a thread (allowed) or a process (refused) depending on CLONE_THREAD.
    syscall_filter.add_rule(refused, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    # clone3() passes its flags in memory, out of the filter's sight: ENOSYS makes the C library fall
    # back to clone(), whose flags it can check.
    syscall_filter.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as program:
        syscall_filter.export_bpf(program)
        program.seek(0)
        return program.read()
