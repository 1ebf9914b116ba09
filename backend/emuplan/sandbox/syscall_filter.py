"""The seccomp filter bwrap installs on the sandboxed model process (``bwrap --seccomp FD``).

An allow list: the system calls that setpriv and prlimit (which start the worker) and Python with
torch need to import a model and run its forward and backward, and nothing else. Any other call, by
any thread, kills the whole process at once (SECCOMP_RET_KILL_PROCESS): io_uring (whose operations,
sockets included, the filter could not see), kernel keyrings (keys that outlive the run), mounts,
tracing, BPF, and every call of another ABI (32-bit, x32) are simply not on the list.

A few calls that ordinary library code makes and copes with failing are refused with EPERM rather
than fatal, since RLIMIT_AS caps one process's address space and these would get around it: a new
process (each would get its own address-space limit; threads share their process's), memory that
lives without a mapping (memfd, SysV shared memory segments, which outlive their detach), sockets
(their buffers hold data no address space counts; the sandbox has no network to reach anyway; torch
probes one at import) and pipe buffers grown past their 64 KiB (fcntl F_SETPIPE_SZ: 1 MiB each, 64 MiB
of kernel memory per user before the kernel's soft limit stops it, measured). Entering or creating a
namespace is refused too: a new user namespace would give the model every capability inside it.
"""

import errno
import tempfile
from functools import cache

CLONE_THREAD = 0x00010000
F_SETPIPE_SZ = 1031

# What setpriv and prlimit need to change user, drop capabilities and set limits, then start Python.
START_THE_WORKER = (
    "capget", "capset", "prctl", "setgroups", "setresuid", "setresgid", "setuid", "setgid", "prlimit64",
    "execve", "execveat",
)  # fmt: skip
FILES = (
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "open", "openat", "close", "close_range", "lseek", "dup", "dup2", "dup3", "ioctl", "flock",
    "fsync", "fdatasync", "ftruncate", "truncate", "fadvise64", "fallocate", "sendfile", "copy_file_range",
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents64", "getcwd", "chdir", "fchdir", "umask",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat",
    "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "utimensat",
    "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    "pipe", "pipe2", "poll", "ppoll", "select", "pselect6",
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "eventfd2", "timerfd_create",
    "timerfd_settime", "timerfd_gettime",
)  # fmt: skip
MEMORY = ("brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mincore", "mbind", "get_mempolicy")
THREADS_AND_SIGNALS = (
    "futex", "set_robust_list", "get_robust_list", "set_tid_address", "rseq", "membarrier", "sched_yield",
    "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_getscheduler", "sched_get_priority_max",
    "sched_get_priority_min", "getpriority",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigpending",
    "sigaltstack", "kill", "tgkill", "tkill", "restart_syscall", "wait4", "waitid", "exit", "exit_group",
)  # fmt: skip
TIME_AND_IDENTITY = (
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "times",
    "alarm", "getitimer", "setitimer",
    "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
    "getgroups", "getpgrp", "getpgid", "getsid", "getrlimit", "getrusage", "sysinfo", "uname", "getcpu",
    "getrandom", "arch_prctl",
)  # fmt: skip
ALLOWED = START_THE_WORKER + FILES + MEMORY + THREADS_AND_SIGNALS + TIME_AND_IDENTITY

HOLD_MEMORY_OUTSIDE_THE_ADDRESS_SPACE = ("memfd_create", "memfd_secret", "shmget", "socket", "socketpair")
START_PROCESSES = ("fork", "vfork")
# A new user namespace would give the model every capability inside it (and with it mounts).
ENTER_NAMESPACES = ("unshare", "setns")
REFUSED = HOLD_MEMORY_OUTSIDE_THE_ADDRESS_SPACE + START_PROCESSES + ENTER_NAMESPACES


@cache
def filter_program() -> bytes:
    """The BPF program for this machine's architecture. A call of any other ABI (32-bit, x32) is a
    call of another architecture to libseccomp, and kills the process as an unlisted call does."""
    # Loading libseccomp asks ldconfig where it is: only when a sandbox starts, not for every command.
    import pyseccomp as seccomp

    syscall_filter = seccomp.SyscallFilter(seccomp.KILL_PROCESS)
    syscall_filter.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    for name in ALLOWED:
        syscall_filter.add_rule(seccomp.ALLOW, name)
    # A refused call fails with EPERM, which the worker reports as refused by the sandbox.
    refused = seccomp.ERRNO(errno.EPERM)
    for name in REFUSED:
        syscall_filter.add_rule(refused, name)
    syscall_filter.add_rule(seccomp.ALLOW, "fcntl", seccomp.Arg(1, seccomp.NE, F_SETPIPE_SZ))
    syscall_filter.add_rule(refused, "fcntl", seccomp.Arg(1, seccomp.EQ, F_SETPIPE_SZ))
    # clone() starts a thread (allowed) or a process (refused) depending on CLONE_THREAD.
    syscall_filter.add_rule(seccomp.ALLOW, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, CLONE_THREAD))
    syscall_filter.add_rule(refused, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    # clone3() passes its flags in memory, out of the filter's sight: ENOSYS makes the C library fall
    # back to clone(), whose flags it can check.
    syscall_filter.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as program:
        syscall_filter.export_bpf(program)
        program.seek(0)
        return program.read()
