"""A huge ns-3 fct.txt is read a block at a time (``stream_blocks.FixedColumnBlocks``), each block converted by
``ns3_fct``'s own conversion, and gives the summary, ranks and warnings the in-memory import gives; a bad line
far down is named by its number alike."""

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.parse import parse_result_file
from emuplan.results.streaming import streamed
from fixtures.generate_results import ns3_fct_text
from fixtures.summaries import STREAM_ALL, assert_same, in_memory_summary, refused_alike, streamed_summary

FLOWS = 20_000


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """64 KiB blocks (about 1,150 lines) and 5,000-row fetches: the file spans many of each."""
    monkeypatch.setattr(streamed, "MAX_BLOCK_BYTES", 64 << 10)
    monkeypatch.setattr(streamed, "FETCH_ROWS", 5000)


def fct_file(tmp_path: Path, name: str = "fct.txt") -> Path:
    path = tmp_path / name
    text = ns3_fct_text(flows=FLOWS, seed=5).encode()
    path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    return path


@pytest.mark.parametrize("name", ["fct.txt", "fct.txt.gz"])
def test_a_large_fct_txt_streamed_gives_the_in_memory_summary(tmp_path, name):
    path = fct_file(tmp_path, name)
    with ImportBudget(ImportLimits(streamed_above_bytes=len(ns3_fct_text(flows=FLOWS, seed=5)) - 1)) as budget:
        assert streamed.streams(path, None, budget)
    got, result = streamed_summary(path)
    parsed = parse_result_file(path, path.name)
    assert (result.source_format, result.row_counts) == ("ns3-fct", {"flows": FLOWS, "samples": 1})
    warning = f"{name}: ns-3 fct.txt has no iterations: the whole file is one iteration"
    assert (result.ranks, result.warnings) == (parsed.ranks, parsed.warnings) == (None, [warning])
    assert_same(in_memory_summary(path), got)
    assert got["flows"]["count"] == FLOWS


def test_the_collective_named_on_import_labels_the_iteration_both_ways(tmp_path):
    path = fct_file(tmp_path)
    assert parse_result_file(path, path.name, collective="all_reduce").samples["collective"].to_pylist() == [
        "all_reduce"
    ]
    with (
        ImportBudget(STREAM_ALL) as budget,
        streamed.streamed_result_file(path, path.name, None, None, "all_reduce", budget) as result,
    ):
        assert [group["collective"] for group in streamed.summarise_streamed(result)["groups"]] == ["all_reduce"]


def test_a_file_forced_to_be_an_fct_txt_is_read_as_one_streamed(tmp_path):
    path = fct_file(tmp_path)
    with (
        ImportBudget(STREAM_ALL) as budget,
        streamed.streamed_result_file(path, path.name, "ns3-fct", None, None, budget) as result,
    ):
        assert result.row_counts == {"flows": FLOWS, "samples": 1}


@pytest.mark.parametrize(
    ("replace", "by", "problem"),
    [
        (" 100 ", " 100 7 ", "line 15002 has 9 fields; ns-3 fct.txt has 8"),
        (" 100 ", " ", "line 15002 has 7 fields; ns-3 fct.txt has 8"),
        (" 100 ", " x ", "line 15002, column 'dport': 'x' is not a 64-bit whole number"),
        (" 100 ", "  ", "line 15002, column 'dport': '' is not a 64-bit whole number"),
        (" 100 ", " 1.5 ", "line 15002, column 'dport': '1.5' is not a 64-bit whole number"),
        (
            " 100 ",
            " 99999999999999999999 ",
            "line 15002, column 'dport': '99999999999999999999' is not a 64-bit whole number",
        ),
        # Past Python's 4,300 digits, int() answered with Python's own message, naming nothing.
        (
            " 100 ",
            f" {'7' * 5000} ",
            "line 15002, column 'dport': '77777777777777777777…' is not a 64-bit whole number",
        ),
    ],
)
def test_a_bad_line_far_down_is_named_by_its_number_as_in_memory(tmp_path, replace, by, problem):
    path = fct_file(tmp_path)
    lines = path.read_text().splitlines()
    lines[15_000] = lines[15_000].replace(replace, by, 1)
    lines.insert(100, "")  # an empty line: skipped by the reader, counted in the line numbers
    path.write_text("\n".join(lines) + "\n")
    assert refused_alike(path) == f"fct.txt: {problem}"


def test_a_stored_fct_run_summarised_again_streamed_gives_the_in_memory_summary(tmp_path):
    """A huge ns-3 run relabelled or linked to a plan is summarised again from its stored tables
    (``streamed.stored_result``), as a per-flow run is."""
    path = fct_file(tmp_path)
    parsed = parse_result_file(path, path.name)
    tables = {"samples": parsed.samples, "flows": parsed.flows}
    for kind, table in tables.items():
        pq.write_table(table, tmp_path / f"{kind}.parquet", **streamed.parquet_write_options(table.schema))
    with (
        ImportBudget(STREAM_ALL) as budget,
        streamed.stored_result(
            "ns3-fct", lambda kind: pa.OSFile(str(tmp_path / f"{kind}.parquet")), ["samples", "flows"], {},
            file_name=path.name, ranks=parsed.ranks, hosts=None, budget=budget,
        ) as result,
    ):  # fmt: skip
        assert_same(in_memory_summary(path), streamed.summarise_streamed(result))
