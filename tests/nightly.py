"""Eight nightly nccl-tests logs of one fabric, built from a real log: each night's cells scaled by about ±1 %
(run-to-run noise, so every file's SHA differs), the sixth losing 12 % more at 1 GiB; imported and named
as nights on one platform (``import_nights``). Shared by the API, CLI and browser tests of the trend."""

from datetime import UTC, datetime, timedelta

from emuplan.services import imports as run_imports
from emuplan.store.db import Database
from paths import NCCL_TESTS

LOG = NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"
# The log is a GCP A3 Mega's (SOURCES.md): 8 × 200 Gbit/s TCPXO per node, not NDR.
PLATFORM = "h100-a3-mega"
GIB = 1 << 30
FIRST_NIGHT = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
# Each night's factor on every busbw and algbw (its times divided by it): the noise of a healthy fabric.
NOISE = (1.000, 1.008, 0.994, 1.003, 0.997, 1.000, 1.005, 0.999)
LOST_NIGHT = 6  # 1-based: the night 1 GiB ran at 88 % of its usual busbw
LOST_FACTOR = 0.88
# busbw of the log's 1 GiB row (out-of-place, then in-place), GB/s.
BUSBW_AT_GIB = (297.86, 298.82)


def _scaled_row(line: str, factor: float) -> str:
    """A data row with its time cells divided and its algbw and busbw cells multiplied by ``factor``."""
    cells = line.split()
    # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
    for start in (5, 9):
        time, algbw, busbw = (float(cell) for cell in cells[start : start + 3])
        cells[start : start + 3] = [f"{time / factor:.1f}", f"{algbw * factor:.2f}", f"{busbw * factor:.2f}"]
    return "  ".join(cells)


def nightly_log(night: int) -> bytes:
    """The log of ``night`` (1-based)."""
    lines = []
    for line in LOG.read_text().splitlines():
        cells = line.split()
        if line.startswith("#") or len(cells) != 13 or not cells[0].isdigit():
            lines.append(line)
            continue
        factor = NOISE[night - 1] * (LOST_FACTOR if night == LOST_NIGHT and int(cells[0]) == GIB else 1.0)
        lines.append(_scaled_row(line, factor))
    return ("\n".join(lines) + "\n").encode()


def import_nights(database: Database, nights: int = len(NOISE), *, tags: tuple[str, ...] = ("nightly",)) -> list[int]:
    """Imports the first ``nights`` logs on PLATFORM, one a night at 02:00 UTC; their run ids in night order."""
    ids = []
    with database.writing() as session:
        for night in range(1, nights + 1):
            run = run_imports.import_result_file(
                session, nightly_log(night), f"night-{night}.txt", name=f"night {night}", tags=tags,
                max_decompressed_bytes=1 << 30,
            )  # fmt: skip
            run.platform = PLATFORM
            run.created_at = FIRST_NIGHT + timedelta(days=night - 1)
            session.flush()
            ids.append(run.id)
    return ids
