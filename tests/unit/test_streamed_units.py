"""A time column whose cells state their unit ("12us") states one unit on every row: a huge file read a block at a
time whose later blocks switch unit, each block one unit alone, is refused as the same file in memory is,
naming the first row that differs (file, line, column)."""

from pathlib import Path

import pytest

from emuplan.results.budget import ImportBudget
from emuplan.results.streaming import stream_blocks, streamed
from fixtures.summaries import STREAM_ALL, refused_alike


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(streamed, "MAX_BLOCK_BYTES", 64 << 10)


def second_block_start(path: Path) -> int:
    """The data row the streamed reader's second block starts at (0-based)."""
    with ImportBudget(STREAM_ALL) as budget:
        source = stream_blocks.blocks_of(
            path, path.name, budget, streamed._block_bytes(STREAM_ALL.streamed_memory_bytes)
        )
        return next(iter(source.batches())).num_rows


def switched_at_a_block(path: Path, header: str, row: str, unit: str, later_unit: str, rows: int = 20_000) -> int:
    """``rows`` rows (``row`` formatted with its number and ``unit``) under ``header``, those from the second block
    on in ``later_unit``; the line the switch is on."""
    lines = [row.format(number=number, unit=unit) for number in range(rows)]
    path.write_text("\n".join([header, *lines]) + "\n")
    switch = second_block_start(path)
    assert 0 < switch < rows // 2
    lines[switch:] = [row.format(number=number, unit=later_unit) for number in range(switch, rows)]
    path.write_text("\n".join([header, *lines]) + "\n")
    return switch + 2


def test_a_later_block_in_another_unit_is_refused_as_in_memory(tmp_path):
    path = tmp_path / "pipeline.csv"
    line = switched_at_a_block(path, "iteration,size,time", "{number},1024,{number}.5{unit}", "us", "ms")
    assert refused_alike(path) == (
        f"pipeline.csv: line {line}, column 'time': mixed units: 'ms' here but 'us' on the first row; use one unit"
    )


def test_a_unit_column_that_switches_in_a_later_block_is_refused_as_in_memory(tmp_path):
    path = tmp_path / "pipeline.csv"
    line = switched_at_a_block(path, "iteration,size,time,unit", "{number},1024,12.5,{unit}", "us", "ms")
    assert refused_alike(path) == (
        f"pipeline.csv: line {line}, column 'unit': mixed units: 'ms' here but 'us' on the first row; use one unit"
    )


def test_flows_whose_later_block_switches_unit_are_refused_as_in_memory(tmp_path):
    """Times with units in their cells: the block reader reads the flows (DuckDB's reader takes units in headers
    only)."""
    path = tmp_path / "flows.csv"
    header = "iteration,src,dst,start,end"
    line = switched_at_a_block(path, header, "{number},0,1,{number}{unit},{number}.5{unit}", "ns", "us")
    assert refused_alike(path) == (
        f"flows.csv: line {line}, column 'start': mixed units: 'us' here but 'ns' on the first row; use one unit"
    )
