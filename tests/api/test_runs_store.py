"""services/imports.py and store/runs.py against a real migrated SQLite database."""

import io

import pyarrow.parquet as pq
import pytest
from sqlmodel import select

from emuplan.results import ResultFileError, parse_result_file
from emuplan.results.analysis.stats import strip_curves
from emuplan.services import imports as run_imports
from emuplan.store import runs
from emuplan.store.tables import Run, RunCurves, RunTable
from paths import RESULTS

pytestmark = pytest.mark.both_databases

GIB = 1024**3


def test_save_run_stores_samples_summary_and_flows_in_one_transaction(database):
    data = (RESULTS / "generated-per-flow.csv").read_bytes()
    parsed = parse_result_file(data, "generated-per-flow.csv")
    with database.writing() as session:
        run = run_imports.save_run(
            session, parsed, name="flows", strategy="data", tags=["a", "b", "a"], origin="generated"
        )
    with database.read_session() as session:
        stored = runs.get_run(session, run.id)
        assert (stored.source_format, stored.origin, stored.sample_count, stored.tags) == (
            "per-flow",
            "generated",
            50,
            ["a", "b"],
        )
        assert stored.summary["flows"]["count"] == 400
        # Lists read the statistics; the curves figures draw sit in run_curves.
        whole = runs.summary_with_curves(session, stored)
        assert stored.summary == strip_curves(whole)
        assert {"ecdf", "delay", "overall_ecdf"} <= set(whole) and "ecdf" in whole["flows"]
        assert not {"ecdf", "delay", "overall_ecdf"} & set(stored.summary) and "ecdf" not in stored.summary["flows"]
        assert runs.load_samples(session, run.id).equals(parsed.samples)
        assert runs.load_table(session, run.id, "flows").equals(parsed.flows)
        # Each column in the encoding made for its type (RLE: the definition levels).
        stored_samples = pq.ParquetFile(io.BytesIO(runs.samples_parquet(session, run.id))).metadata.row_group(0)
        encodings = {
            stored_samples.column(i).path_in_schema: stored_samples.column(i).encodings
            for i in range(stored_samples.num_columns)
        }
        assert encodings == {
            "iteration": ("RLE", "DELTA_BINARY_PACKED"),
            "collective": ("PLAIN", "RLE", "RLE_DICTIONARY"),
            "size_bytes": ("RLE", "DELTA_BINARY_PACKED"),
            "duration_us": ("RLE", "BYTE_STREAM_SPLIT"),
            "start_us": ("RLE", "BYTE_STREAM_SPLIT"),
            "variant": ("PLAIN", "RLE", "RLE_DICTIONARY"),
            "label": ("PLAIN", "RLE", "RLE_DICTIONARY"),
            "algbw_gbps": ("RLE", "BYTE_STREAM_SPLIT"),
            "busbw_gbps": ("RLE", "BYTE_STREAM_SPLIT"),
            "ideal_pct": ("RLE", "BYTE_STREAM_SPLIT"),
        }


def test_import_detects_duplicates_by_content_hash(database):
    data = (RESULTS / "generated-per-iteration.csv").read_bytes()
    with database.writing() as session:
        first = run_imports.import_result_file(session, data, "a.csv", max_decompressed_bytes=GIB)
    with database.writing() as session, pytest.raises(run_imports.DuplicateRun) as raised:
        run_imports.import_result_file(session, data, "b.csv", max_decompressed_bytes=GIB)
    assert raised.value.existing_run_id == first.id
    assert f"already imported as run {first.id}" in str(raised.value)


def test_failed_import_leaves_nothing(database):
    bad = b"iteration,size,time_ms\n0,8,1\n1,8,-1\n"
    with pytest.raises(ResultFileError), database.writing() as session:
        run_imports.import_result_file(session, bad, "bad.csv", max_decompressed_bytes=GIB)
    with pytest.raises(runs.RunInputError, match="plan_id: no plan with id 99"), database.writing() as session:
        run_imports.import_result_file(
            session, (RESULTS / "generated-fct.txt").read_bytes(), "fct.txt", plan_id=99, max_decompressed_bytes=GIB
        )
    # A failure after a run, its samples and its summary were written rolls all of them back.
    with pytest.raises(ResultFileError), database.writing() as session:
        written = run_imports.import_result_file(
            session, (RESULTS / "generated-fct.txt").read_bytes(), "fct.txt", max_decompressed_bytes=GIB
        )
        assert session.get(Run, written.id).sample_count > 0
        assert session.exec(select(RunTable).where(RunTable.run_id == written.id)).all() != []
        run_imports.import_result_file(session, bad, "bad-after.csv", max_decompressed_bytes=GIB)
    with database.read_session() as session:
        assert session.exec(select(Run)).all() == []
        assert session.exec(select(RunTable)).all() == []


def test_list_filters_and_delete(database):
    with database.writing() as session:
        data_run = run_imports.save_run(
            session,
            parse_result_file(b"iteration,size,time_ms\n0,8,1\n", "x.csv"),
            name="dp",
            strategy="data",
            tags=["fabric-a"],
        )
        run_imports.save_run(
            session, parse_result_file(b"iteration,size,time_ms\n0,8,2\n", "y.csv"), name="tp", strategy="tensor"
        )
    with database.read_session() as session:
        assert [r.name for r in runs.list_runs(session)] == ["tp", "dp"]
        assert [r.name for r in runs.list_runs(session, runs.RunFilters(strategy="data"))] == ["dp"]
        assert [r.name for r in runs.list_runs(session, runs.RunFilters(tag="fabric-a"))] == ["dp"]
    with database.writing() as session:
        runs.delete_run(session, data_run.id)
    with database.read_session() as session:
        assert [r.name for r in runs.list_runs(session)] == ["tp"]
        assert session.exec(select(RunTable).where(RunTable.run_id == data_run.id)).all() == []
        assert session.get(RunCurves, data_run.id) is None
        with pytest.raises(runs.RunNotFound):
            runs.get_run(session, data_run.id)


def test_list_pages_newest_first_and_counts_what_the_filters_match(database):
    tags = [["fabric-a"], ["fabric_b"], ["50%"], ["fabric-a", "x"], []]
    with database.writing() as session:
        for index, run_tags in enumerate(tags):
            run_imports.save_run(
                session,
                parse_result_file(b"iteration,size,time_ms\n0,8,%d\n" % (index + 1), f"{index}.csv"),
                name=f"run {index}",
                strategy="data" if index % 2 == 0 else "tensor",
                tags=run_tags,
            )
    with database.read_session() as session:
        assert [r.name for r in runs.list_runs(session, limit=2)] == ["run 4", "run 3"]
        assert [r.name for r in runs.list_runs(session, limit=2, offset=2)] == ["run 2", "run 1"]
        assert [r.name for r in runs.list_runs(session, limit=2, offset=4)] == ["run 0"]
        assert runs.count_runs(session) == runs.RunCount(5, exact=True)
        assert [r.name for r in runs.list_runs(session, runs.RunFilters(tag="fabric-a"))] == ["run 3", "run 0"]
        assert runs.count_runs(session, runs.RunFilters(tag="fabric-a")) == runs.RunCount(2, exact=True)
        # A tag is matched whole, its LIKE wildcards as plain characters.
        assert [r.name for r in runs.list_runs(session, runs.RunFilters(tag="fabric_b"))] == ["run 1"]
        assert runs.list_runs(session, runs.RunFilters(tag="fabric")) == []
        assert runs.list_runs(session, runs.RunFilters(tag="fabric%")) == []
        assert [r.name for r in runs.list_runs(session, runs.RunFilters(tag="50%"))] == ["run 2"]
        assert runs.count_runs(session, runs.RunFilters(strategy="data", tag="fabric-a")) == runs.RunCount(
            1, exact=True
        )
