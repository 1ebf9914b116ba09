"""The server's memory: large blocks go back to the system as soon as they are freed, and what an import
freed goes back once it has answered.

glibc's malloc maps blocks from 128 KiB up on their own and unmaps them when freed, but it raises that
threshold to the size of every such block freed (up to 32 MiB). After the first large upload the column
arrays of the next (8 MB per million rows) came from the heap: what an upload freed stayed resident,
scattered over the arenas of the threads it ran on, and a 2M-row import peaked ~150 MB higher with
every upload. A fixed threshold of 8 MiB (a float64 column of 1.05M rows) keeps those mapped blocks; the
smaller temporaries stay on the heap, where reusing them costs no page faults (a 1 MiB threshold made an
import up to a third slower). Arrow's buffers have their own allocator.

Those smaller blocks and Arrow's allocator (mimalloc) still keep what an import freed, for reuse: after a
2M-row import the server stayed ~165 MB above its size before it (345 against 180 MB; Arrow's pool held
111 MB of it, the heaps 54 MB), and the next import's peak stood on top of that.
"""

import ctypes
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
LARGE_BLOCK_BYTES = 8 << 20


def return_large_blocks_when_freed() -> bool:
    """Fix glibc's mmap threshold at ``LARGE_BLOCK_BYTES`` (for the whole process); False where malloc
    is not glibc's."""
    if not sys.platform.startswith("linux"):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    return mallopt is not None and mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES) == 1


def return_freed_memory() -> None:
    """Hand the memory freed since the last call back to the system: Arrow's pool and glibc's heaps."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
        if malloc_trim is not None:
            malloc_trim(0)
