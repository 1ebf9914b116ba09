"""DuckDB running out of the streamed import's memory while its sorted batches are being read (the error then
comes through Arrow's batch reader as an OSError carrying DuckDB's text) is the domain's 413, as it is when the
query fails at once, and the import's temporary files go with it."""

import tempfile

import pytest

from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.canonical import ResultFileTooLarge
from emuplan.results.streaming import streamed
from fixtures.generate_results import per_iteration_table, write_csv


def test_out_of_memory_in_the_middle_of_the_sorted_stream_is_413(tmp_path, monkeypatch):
    """2 M samples under 128 MiB (DuckDB 44 MB): the sort spills, and reading it back fails pinning a block."""
    path = tmp_path / "pipeline.csv"
    write_csv(per_iteration_table(2_000_000, seed=1), path)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    limits = ImportLimits(streamed_above_bytes=0, streamed_memory_bytes=128 << 20)
    with (
        pytest.raises(ResultFileTooLarge) as raised,
        ImportBudget(limits) as budget,
        streamed.streamed_result_file(path, path.name, None, None, None, budget) as result,
    ):
        streamed.summarise_streamed(result)
    assert type(raised.value.__cause__) is OSError
    assert str(raised.value) == (
        "pipeline.csv: summarising it takes more than the 134217728 bytes of memory a streamed import may hold "
        "(EMUPLAN_STREAMED_IMPORT_MEMORY_BYTES; the default is 1073741824): raise it on the server and try again"
    )
    assert list(temporary.iterdir()) == []
