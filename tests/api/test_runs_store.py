"""store/runs.py against a real migrated SQLite database."""

import pytest
from sqlmodel import select

from emuplan.results import ResultFileError, parse_result_file
from emuplan.store import runs
from emuplan.store.models import Run, RunTable
from paths import RESULTS

GIB = 1024**3


def test_save_run_stores_samples_summary_and_flows_in_one_transaction(database):
    data = (RESULTS / "generated-per-flow.csv").read_bytes()
    parsed = parse_result_file(data, "generated-per-flow.csv")
    with database.writing() as session:
        run = runs.save_run(session, parsed, name="flows", strategy="data", tags=["a", "b", "a"], origin="generated")
    with database.read_session() as session:
        stored = runs.get_run(session, run.id)
        assert (stored.source_format, stored.origin, stored.sample_count, stored.tags) == (
            "per-flow",
            "generated",
            50,
            ["a", "b"],
        )
        assert stored.summary["flows"]["count"] == 400
        assert runs.load_samples(session, run.id).equals(parsed.samples)
        assert runs.load_table(session, run.id, "flows").equals(parsed.flows)


def test_import_detects_duplicates_by_content_hash(database):
    data = (RESULTS / "generated-per-iteration.csv").read_bytes()
    with database.writing() as session:
        first = runs.import_result_file(session, data, "a.csv", max_decompressed_bytes=GIB)
    with database.writing() as session, pytest.raises(runs.DuplicateRun) as raised:
        runs.import_result_file(session, data, "b.csv", max_decompressed_bytes=GIB)
    assert raised.value.existing_run_id == first.id
    assert f"already imported as run {first.id}" in str(raised.value)


def test_failed_import_leaves_nothing(database):
    bad = b"iteration,size,time_ms\n0,8,1\n1,8,-1\n"
    with pytest.raises(ResultFileError), database.writing() as session:
        runs.import_result_file(session, bad, "bad.csv", max_decompressed_bytes=GIB)
    with pytest.raises(runs.RunInputError, match="plan_id: no plan with id 99"), database.writing() as session:
        runs.import_result_file(
            session, (RESULTS / "generated-fct.txt").read_bytes(), "fct.txt", plan_id=99, max_decompressed_bytes=GIB
        )
    # A failure after a run, its samples and its summary were written rolls all of them back.
    with pytest.raises(ResultFileError), database.writing() as session:
        written = runs.import_result_file(
            session, (RESULTS / "generated-fct.txt").read_bytes(), "fct.txt", max_decompressed_bytes=GIB
        )
        assert session.get(Run, written.id).sample_count > 0
        assert session.exec(select(RunTable).where(RunTable.run_id == written.id)).all() != []
        runs.import_result_file(session, bad, "bad-after.csv", max_decompressed_bytes=GIB)
    with database.read_session() as session:
        assert session.exec(select(Run)).all() == []
        assert session.exec(select(RunTable)).all() == []


def test_list_filters_and_delete(database):
    with database.writing() as session:
        data_run = runs.save_run(
            session,
            parse_result_file(b"iteration,size,time_ms\n0,8,1\n", "x.csv"),
            name="dp",
            strategy="data",
            tags=["fabric-a"],
        )
        runs.save_run(
            session, parse_result_file(b"iteration,size,time_ms\n0,8,2\n", "y.csv"), name="tp", strategy="tensor"
        )
    with database.read_session() as session:
        assert [r.name for r in runs.list_runs(session)] == ["tp", "dp"]
        assert [r.name for r in runs.list_runs(session, strategy="data")] == ["dp"]
        assert [r.name for r in runs.list_runs(session, tag="fabric-a")] == ["dp"]
    with database.writing() as session:
        runs.delete_run(session, data_run.id)
    with database.read_session() as session:
        assert [r.name for r in runs.list_runs(session)] == ["tp"]
        assert session.exec(select(RunTable).where(RunTable.run_id == data_run.id)).all() == []
        with pytest.raises(runs.RunNotFound):
            runs.get_run(session, data_run.id)
