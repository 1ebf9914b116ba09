"""The server's memory: a freed 16 MB block leaves the process at once, also after the first one; what the
heaps and Arrow's pool keep after an import goes back when the import is done."""

import json
import subprocess
import sys

import pytest

RESIDENT_AFTER_FREEING = """
import json, sys
import numpy as np
from emuplan.api.memory import return_large_blocks_when_freed

def resident_mb():
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1]) * 1024 / 1e6

fixed = return_large_blocks_when_freed() if sys.argv[1] == "fixed" else None
first = np.ones(2_000_000)  # 16 MB: a column of 2M float64 samples
del first  # with the default setting this raises the threshold above 16 MB
before = resident_mb()
second = np.ones(2_000_000)
del second
print(json.dumps([fixed, round(resident_mb() - before)]))
"""


def resident_growth(setting: str) -> list:
    result = subprocess.run(
        [sys.executable, "-c", RESIDENT_AFTER_FREEING, setting], capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(result.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_second_large_block_is_returned_when_freed_only_with_the_setting():
    assert resident_growth("default") == [None, 16]
    assert resident_growth("fixed") == [True, 0]


KEPT_AFTER_FREEING = """
import json
import numpy as np
import pyarrow as pa
from emuplan.api.memory import return_freed_memory, return_large_blocks_when_freed

def resident_mb():
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1]) * 1024 / 1e6

return_large_blocks_when_freed()
before = resident_mb()
heap, pinned = [], []
for _ in range(64):  # 64 x 1 MB from glibc's heap (below the mmap threshold), each followed by a 1 kB block kept
    heap.append(np.ones(125_000))
    pinned.append(bytearray(1000))
arrow = [pa.allocate_buffer(10**6) for _ in range(64)]  # 64 x 1 MB from Arrow's pool
for buffer in arrow:
    np.frombuffer(buffer, dtype=np.uint8)[:] = 1
del heap, arrow
kept = resident_mb() - before
return_freed_memory()
print(json.dumps([round(kept), round(resident_mb() - before)]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_what_the_heaps_and_arrows_pool_kept_goes_back_to_the_system():
    result = subprocess.run(
        [sys.executable, "-c", KEPT_AFTER_FREEING], capture_output=True, text=True, check=True, timeout=60
    )
    kept, left = json.loads(result.stdout)
    assert kept >= 128  # both 64 MB stay resident once freed
    assert left <= 8  # the pinned kilobytes and the pages around them
