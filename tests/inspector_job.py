"""The constructed NCCL Inspector dump of a two-process job (tests/fixtures/results/nccl-inspector), and a dump
zipped the way a user zips the dump directory."""

import io
import zipfile
from pathlib import Path

from paths import RESULTS

INSPECTOR_JOB = [
    RESULTS / "nccl-inspector" / name for name in ("constructed-gpu-a-pid101.log", "constructed-gpu-b-pid202.log")
]

# NCCL 2.30's layout: header.comm_name, and p2p_perf records between the collectives.
INSPECTOR_2_30_JOB = [
    RESULTS / "nccl-inspector" / name
    for name in ("constructed-nccl-2.30-gpu-a-pid101.log", "constructed-nccl-2.30-gpu-b-pid202.log")
]


def zipped_dump(paths: list[Path]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in paths:
            archive.write(path, f"nccl-inspector-4242/{path.name}")
    return buffer.getvalue()
