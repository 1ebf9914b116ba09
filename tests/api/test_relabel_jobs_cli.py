"""``emuplan relabel`` of a huge run (its stored tables past EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES, 1 byte here):
through a server it follows the relabel job the PATCH answered 202 with, on the local database it does the job's
work itself; either way it prints the progress on stderr and then what a small run's relabelling prints."""

import pytest
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.settings import Settings
from fixtures.generate_results import per_iteration_table, write_csv
from live_server import start_server, stop_server

pytestmark = pytest.mark.both_databases
runner = CliRunner()


def test_relabelling_a_huge_run_waits_for_its_job_and_prints_the_progress(database_url, cli_env, monkeypatch, tmp_path):
    monkeypatch.setenv("EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES", "1")
    live = start_server(Settings(database_url=database_url, demo=False, streamed_import_above_bytes=1))
    try:
        remote = ["--server", live.url]
        for name, rows in (("one.csv", 2000), ("two.csv", 2000)):
            write_csv(per_iteration_table(rows, seed=7), tmp_path / name)
            if name == "two.csv":
                (tmp_path / name).write_bytes((tmp_path / name).read_bytes() + b"\n")
            assert runner.invoke(app, [*remote, "import", str(tmp_path / name)]).exit_code == 0
        through_server = runner.invoke(app, [*remote, "relabel", "1", "--collective", "all_gather"])
        locally = runner.invoke(app, ["relabel", "2", "--collective", "all_gather"])
    finally:
        stop_server(live)
    for result, run_id, name in ((through_server, 1, "one.csv"), (locally, 2, "two.csv")):
        assert result.exit_code == 0, result.output
        progress = result.stderr.splitlines()
        assert progress[0].startswith(f"run {run_id}: summarising again: ")
        assert progress[-1] == f"run {run_id}: summarising again: succeeded"
        assert (
            result.stdout.splitlines()[0]
            == f"run {run_id}: {name}: collective set after import: all_reduce → all_gather"
        )
    assert through_server.stdout.replace("run 1: one.csv", "run 2: two.csv") == locally.stdout
