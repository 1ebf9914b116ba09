"""The server's malloc setting: a freed 16 MB block leaves the process at once, also after the first one."""

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
