"""A huge upload imported streamed (results/streaming/streamed.py) is stored from disk in parts and reads back, through
the store and the API, as the in-memory import would have stored it."""

import gzip
import io
import tempfile

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from emuplan.main import create_app
from emuplan.results.analysis.stats import strip_curves
from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.parse import parse_result_file
from emuplan.services import imports as run_imports
from emuplan.settings import Settings
from emuplan.store import runs, table_files
from emuplan.store.tables import RunTable
from fixtures.generate_results import per_flow_table, per_iteration_table, write_csv

pytestmark = pytest.mark.both_databases


@pytest.fixture
def flows_csv(tmp_path):
    path = tmp_path / "flows.csv"
    write_csv(per_flow_table(iterations=400, ranks=8, qps=2, seed=5), path)
    return path


def test_streamed_run_is_stored_in_parts_and_reads_back_whole(database, flows_csv, monkeypatch):
    monkeypatch.setattr(table_files, "PART_BYTES", 16 << 10)
    in_memory = parse_result_file(flows_csv, flows_csv.name)
    with database.writing() as session, ImportBudget(ImportLimits(streamed_above_bytes=0)) as budget:
        run = run_imports.import_result_file(session, flows_csv, flows_csv.name, budget=budget)
    with database.read_session() as session:
        stored = runs.get_run(session, run.id)
        assert (stored.source_format, stored.sample_count, stored.ranks) == ("per-flow", 400, 8)
        kinds = session.exec(select(RunTable.kind).where(RunTable.run_id == run.id)).all()
        assert "flows.part2" in kinds and "samples" in kinds
        flows = runs.load_table(session, run.id, "flows")
        assert flows.to_pylist() == in_memory.flows.to_pylist()
        assert runs.load_samples(session, run.id).to_pylist() == in_memory.samples.to_pylist()
        downloaded = b"".join(table_files.stored_table_pieces(session, run.id, "flows"))
        assert pq.read_table(io.BytesIO(downloaded)).to_pylist() == flows.to_pylist()
        curves = runs.summary_with_curves(session, stored)
        assert stored.summary == strip_curves(curves)
        assert curves["flows"]["count"] == 6400 and curves["stragglers"]["calls"] == 400


def test_upload_over_the_threshold_is_streamed_and_answers_as_before(database_url, flows_csv):
    settings = Settings(database_url=database_url, demo=False, streamed_import_above_bytes=1000)
    with TestClient(create_app(settings)) as client:
        answer = client.post("/api/runs", files={"file": ("flows.csv", flows_csv.read_bytes(), "text/csv")})
        assert answer.status_code == 201, answer.text
        run = answer.json()
        assert (run["source_format"], run["sample_count"], run["ranks"]) == ("per-flow", 400, 8)
        again = client.post("/api/runs", files={"file": ("again.csv", flows_csv.read_bytes(), "text/csv")})
        assert again.status_code == 409 and again.json()["existing_run_id"] == run["id"]
        bad = flows_csv.read_text().replace("\n3,", "\nthree,", 1)
        refused = client.post("/api/runs", files={"file": ("bad.csv", bad.encode(), "text/csv")})
        assert refused.status_code == 400
        assert refused.json()["detail"] == "bad.csv: line 50, column 'iteration': 'three' is not a number"


def test_a_gzip_upload_over_the_threshold_is_streamed_and_a_gzip_bomb_still_answers_413(database_url, flows_csv):
    settings = Settings(
        database_url=database_url, demo=False, streamed_import_above_bytes=1000, max_decompressed_bytes=5_000_000
    )
    with TestClient(create_app(settings)) as client:
        compressed = gzip.compress(flows_csv.read_bytes())
        answer = client.post("/api/runs", files={"file": ("flows.csv.gz", compressed, "application/gzip")})
        assert answer.status_code == 201, answer.text
        run = answer.json()
        assert (run["source_format"], run["sample_count"], run["ranks"]) == ("per-flow", 400, 8)
        bomb = gzip.compress(b"size,time_ms,collective\n" + b"1024,1.0,all_reduce\n" * 1_000_000)
        refused = client.post("/api/runs", files={"file": ("bomb.csv.gz", bomb, "application/gzip")})
        assert refused.status_code == 413
        assert refused.json()["detail"] == (
            "bomb.csv.gz: decompresses to more than 5000000 bytes (EMUPLAN_MAX_DECOMPRESSED_BYTES)"
        )


def test_an_import_whose_sort_does_not_fit_its_memory_answers_413_and_leaves_nothing(
    database_url, tmp_path, monkeypatch
):
    """4 MiB for the import gives DuckDB 1 MB, less than the 2 MiB its sort asks for at once: it fails every time
    (the setting's floor is 64 MiB; lowered on the settings object past its check, as a server could not)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    path = tmp_path / "pipeline.csv"
    write_csv(per_iteration_table(40_000, seed=7), path)
    settings = Settings(database_url=database_url, demo=False, streamed_import_above_bytes=1000)
    with TestClient(create_app(settings.model_copy(update={"streamed_import_memory_bytes": 4 << 20}))) as client:
        answer = client.post("/api/runs", files={"file": ("pipeline.csv", path.read_bytes(), "text/csv")})
        assert answer.status_code == 413, answer.text
        assert answer.json()["detail"] == (
            "pipeline.csv: summarising it takes more than the 4194304 bytes of memory a streamed import may hold "
            "(EMUPLAN_STREAMED_IMPORT_MEMORY_BYTES; the default is 1073741824): raise it on the server and try again"
        )
        assert client.get("/api/runs").json() == []
    assert list(temporary.iterdir()) == []
