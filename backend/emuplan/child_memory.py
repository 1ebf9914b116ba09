"""The memory limit of the processes the server starts that run no Python of a user's (ASTRA-sim, the measurement
workers; the sandbox sets its own, ``sandbox.runner``): util-linux ``prlimit`` sets RLIMIT_DATA and execs the
command, so the limit holds from its first instruction and for whatever it starts. RLIMIT_DATA bounds what a
process can write to (heap, anonymous and private mappings), not address space it only reserves (CUDA reserves
terabytes it never touches); past it an allocation fails (C++ ``std::bad_alloc``, Python ``MemoryError``)."""

MB = 1024**2


def memory_limited(command: list[str], limit_bytes: int) -> list[str]:
    """``command`` run under a data-segment limit of ``limit_bytes``."""
    return ["prlimit", f"--data={limit_bytes}", "--", *command]
