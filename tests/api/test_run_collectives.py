"""A run's collective: chosen at upload (``collective`` and ``format`` form fields, ``emuplan import``), set after
import (``PATCH /api/runs/{id}``, ``emuplan relabel``), its statistics following."""

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.main import create_app
from emuplan.roles import Role
from emuplan.settings import Settings
from emuplan.store import accounts
from emuplan.store.db import Database
from paths import NCCL_TESTS, SHARED_NCCL

pytestmark = pytest.mark.both_databases

B200 = SHARED_NCCL / "b200-allreduce-2.17.6.txt"
A100 = SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"
# Cells that fit all_gather and all_to_all alike: a renamed copy is 'unknown'.
ALLTOALL = NCCL_TESTS / "v100-64rank-alltoall-pre2.13.txt"
COLLECTIVES = "'all_reduce', 'all_gather', 'reduce_scatter', 'broadcast', 'reduce', 'all_to_all' or 'send_recv'"
# Wide enough for every line whole: tests/api/test_cli_fits.py reads the CLI at 80 columns.
runner = CliRunner(env={"COLUMNS": "1000"})


def upload(client, file_name: str, data: bytes, **form):
    return client.post("/api/runs", files={"file": (file_name, data)}, data=form)


def labels(client, run_id: int) -> list[str]:
    return [group["label"] for group in client.get(f"/api/runs/{run_id}/stats").json()["groups"]]


def test_the_b200_log_uploaded_as_slurm_4242_out_is_all_reduce_and_compares_with_the_well_named_one(client):
    well_named = upload(client, "b200-allreduce-2.17.6.txt", B200.read_bytes()).json()
    # One more newline: the same log, not refused as a duplicate.
    renamed = upload(client, "slurm-4242.out", B200.read_bytes() + b"\n").json()
    assert (renamed["ranks"], renamed["summary"]["groups"]) == (16, well_named["summary"]["groups"])
    comparison = client.get("/api/compare", params={"runs": f"{well_named['id']},{renamed['id']}"}).json()
    assert comparison["notice"] is None
    assert all(test["comparable"] for test in comparison["ks_tests"])


def test_upload_takes_a_collective_and_a_format_and_names_the_field_it_refuses(client):
    chosen = upload(client, "slurm-1.out", ALLTOALL.read_bytes(), collective="all_to_all", format="nccl-tests")
    assert chosen.status_code == 201, chosen.text
    assert (chosen.json()["source_format"], labels(client, chosen.json()["id"])[0]) == (
        "nccl-tests",
        "all_to_all · 268435456 B · out-of-place",
    )
    for field, value, detail in [
        ("collective", "allreduce", f"collective: Input should be {COLLECTIVES}"),
        ("format", "xml", "format: Input should be 'per-iteration', 'kai-summary', 'per-flow', 'ns3-fct', "
         "'nccl-tests', 'nccl-tests-json', 'nccl-inspector' or 'pytorch-profiler'"),
    ]:  # fmt: skip
        refused = upload(client, "slurm-2.out", A100.read_bytes(), **{field: value})
        assert (refused.status_code, refused.json()["detail"]) == (422, detail)
    contradicted = upload(client, "slurm-2.out", A100.read_bytes(), collective="broadcast")
    assert (contradicted.status_code, contradicted.json()["detail"]) == (
        400,
        "slurm-2.out: line 22: collective 'broadcast' was given, but its redop/root/count cells fit only all_reduce; "
        "leave the collective out (a run can be relabelled after import)",
    )


def test_relabelling_a_run_rewrites_its_samples_and_statistics(client):
    well_named = upload(client, "alltoall.txt", ALLTOALL.read_bytes()).json()
    unknown = upload(client, "slurm-4242.out", ALLTOALL.read_bytes() + b"\n").json()
    assert labels(client, unknown["id"])[0] == "unknown · 268435456 B · out-of-place"
    before = client.get("/api/compare", params={"runs": f"{well_named['id']},{unknown['id']}"}).json()
    assert before["notice"].startswith("#2 slurm-4242.out shares no (collective, data size) with the baseline")

    changed = client.patch(f"/api/runs/{unknown['id']}", json={"collectives": {"unknown": "all_to_all"}})
    assert changed.status_code == 200, changed.text
    run = changed.json()
    assert run["summary"]["groups"] == well_named["summary"]["groups"]
    assert run["warnings"][-1] == "collective set after import: unknown → all_to_all"
    assert client.get(f"/api/runs/{unknown['id']}").json() == run
    samples = client.get(f"/api/runs/{unknown['id']}/samples.csv").text.splitlines()
    assert [line.split(",")[1] for line in samples[1:]] == ['"all_to_all"'] * 4
    after = client.get("/api/compare", params={"runs": f"{well_named['id']},{unknown['id']}"}).json()
    assert after["notice"] is None
    busbw = [group["stats"]["busbw_gbps"] for group in after["runs"][1]["groups"]]
    assert [cell["value"] for cell in busbw] == [0.51, 0.51, 0.51, 0.51]
    assert [cell["ratio"] for cell in busbw] == [1.0, 1.0, 1.0, 1.0]


def test_relabelling_a_size_sweep_of_unknown_ranks_infers_them_from_the_busbw_factor(client):
    # The B200 log without its '<op>_perf' line and with "none" for its redop cells: the cells of send/recv,
    # whose busbw is its algbw, not 1.875 × it, so nothing fits and it is stored as 'unknown' of unknown ranks.
    text = B200.read_text().replace("# Collective test starting: all_reduce_perf\n", "")
    stored = upload(client, "slurm-5.out", text.replace("     sum      -1", "    none      -1").encode()).json()
    assert (stored["ranks"], stored["summary"]["groups"][0]["collective"]) == (None, "unknown")
    changed = client.patch(f"/api/runs/{stored['id']}", json={"collectives": {"unknown": "all_reduce"}}).json()
    assert changed["ranks"] == 16  # busbw/algbw = 2·15/16
    assert changed["warnings"][-2:] == [
        "16 ranks inferred from the busbw/algbw factor of all_reduce",
        "collective set after import: unknown → all_reduce",
    ]
    largest = client.get(f"/api/runs/{stored['id']}/stats").json()["groups"][-1]
    assert (largest["label"], round(largest["busbw_gbps"], 4)) == ("all_reduce · 2147483648 B · in-place", 702.9069)


def test_relabelling_refuses_bad_values_naming_the_field(client):
    run_id = upload(client, "slurm-4242.out", ALLTOALL.read_bytes()).json()["id"]
    for body, status, detail in [
        ({"collectives": {"unknown": "sideways"}}, 422, None),
        ({"collectives": {"all_reduce": "broadcast"}}, 422,
         f"collectives: run {run_id} has no collective 'all_reduce'; it has unknown"),
        ({"collectives": {}}, 422, "collectives: give at least one 'old name': 'new name' pair"),
        ({"size": "x"}, 422, None),
    ]:  # fmt: skip
        response = client.patch(f"/api/runs/{run_id}", json=body)
        assert response.status_code == status, response.text
        if detail is not None:
            assert response.json()["detail"] == detail
    invalid = client.patch(f"/api/runs/{run_id}", json={"collectives": {"unknown": "sideways"}}).json()["detail"]
    assert (invalid[0]["loc"], invalid[0]["msg"]) == (
        ["body", "collectives", "unknown"],
        f"Input should be {COLLECTIVES}",
    )
    assert client.patch("/api/runs/999", json={"collectives": {"unknown": "all_to_all"}}).status_code == 404
    assert labels(client, run_id)[0] == "unknown · 268435456 B · out-of-place"


def test_relabelling_needs_the_editor_role(database_url):
    database = Database(database_url)
    try:
        with database.writing() as session:
            tokens = {}
            for name, role in (("ed", Role.editor), ("vi", Role.viewer)):
                account, _ = accounts.create_account(session, name, role)
                tokens[name] = accounts.create_api_token(session, account.id, "test", None)[1]
            session.commit()
    finally:
        database.dispose()
    settings = Settings(database_url=database_url, demo=False, auth="accounts")
    with TestClient(create_app(settings)) as client:
        editor, viewer = ({"Authorization": f"Bearer {tokens[name]}"} for name in ("ed", "vi"))
        response = client.post(
            "/api/runs", files={"file": ("slurm-1.out", ALLTOALL.read_bytes())}, headers=editor
        )  # fmt: skip
        run_id = response.json()["id"]
        body = {"collectives": {"unknown": "all_to_all"}}
        refused = client.patch(f"/api/runs/{run_id}", json=body, headers=viewer)
        assert refused.status_code == 403
        assert refused.json()["detail"].startswith("This needs the editor role (")
        assert client.patch(f"/api/runs/{run_id}", json=body, headers=editor).status_code == 200
        # The run page offers the form only to those who may use it.
        assert 'id="relabel-form"' in client.get(f"/runs/{run_id}", headers=editor).text
        assert 'id="relabel-form"' not in client.get(f"/runs/{run_id}", headers=viewer).text


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_import_and_relabel_on_the_command_line(cli_env, client, tmp_path):
    renamed = tmp_path / "slurm-4242.out"
    renamed.write_bytes(ALLTOALL.read_bytes() + b"\n")
    assert invoke("import", str(ALLTOALL)).exit_code == 0
    refused = invoke("import", str(renamed), "--collective", "allreduce")
    assert refused.exit_code == 2
    assert "Invalid value for '--collective'" in refused.output
    assert invoke("import", str(renamed)).exit_code == 0
    compared = invoke("compare", "1", "2")
    assert "#2 slurm-4242.out shares no (collective, data size) with the baseline" in compared.output

    relabelled = invoke("relabel", "2", "--collective", "all_to_all")
    assert relabelled.exit_code == 0, relabelled.output
    lines = relabelled.output.splitlines()
    assert lines[0] == "run 2: slurm-4242.out: collective set after import: unknown → all_to_all"
    assert lines[2].split() == ["all_to_all", "·", "268435456", "B", "·", "out-of-place", "1", "520935",
                                "520935", "520935", "1.00", "0.51", "—"]  # fmt: skip
    compared = invoke("compare", "1", "2")
    assert compared.exit_code == 0, compared.output
    assert "shares no" not in compared.output
    assert "  #2 vs #1: same (within ±5 %) at 2 sizes (256 MiB–512 MiB)" in compared.output.splitlines()
    assert (
        json.loads(invoke("stats", "2", "--json").output)["groups"] == client.get("/api/runs/1/stats").json()["groups"]
    )

    missing = invoke("relabel", "2", "--collective", "all_gather", "--from", "unknown")
    assert (missing.exit_code, missing.output.strip()) == (
        2,
        "error: collectives: run 2 has no collective 'unknown'; it has all_to_all",
    )
    as_json = json.loads(invoke("relabel", "2", "--collective", "all_gather", "--json").output)
    assert as_json == client.get("/api/runs/2").json()
    assert as_json["summary"]["groups"][0]["label"] == "all_gather · 268435456 B · out-of-place"


def test_relabel_without_from_needs_a_run_of_one_collective(cli_env, tmp_path):
    two_tests = tmp_path / "two-tests.log"
    two_tests.write_bytes(
        (NCCL_TESTS / "gtx1080-2gpu-allgather-pre2.13.txt").read_bytes()
        + b"\n"
        + (NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt").read_bytes()
    )
    assert invoke("import", str(two_tests)).exit_code == 0
    refused = invoke("relabel", "1", "--collective", "reduce_scatter")
    assert (refused.exit_code, refused.output.strip()) == (
        2,
        "error: run 1 has 2 collectives (all_gather, all_reduce): say which with --from",
    )


def test_relabel_against_a_remote_server_prints_what_the_local_command_prints(
    accounts_server, add_account, database: Database, cli_env, tmp_path
):
    add_account("ed", Role.editor)
    with database.writing() as session:
        token = accounts.create_api_token(session, accounts.get_account(session, "ed").id, "test", None)[1]
    remote = ["--server", accounts_server.url, "--token", token]
    no_server = {"EMUPLAN_SERVER": None, "EMUPLAN_TOKEN": None}
    for copy, extra in (("slurm-1.out", b""), ("slurm-2.out", b"\n")):
        (tmp_path / copy).write_bytes(ALLTOALL.read_bytes() + extra)
        assert runner.invoke(app, [*remote, "import", str(tmp_path / copy)], env=no_server).exit_code == 0
    relabelled = runner.invoke(app, [*remote, "relabel", "1", "--collective", "all_to_all"], env=no_server)
    assert relabelled.exit_code == 0, relabelled.output
    local = runner.invoke(app, ["relabel", "2", "--collective", "all_to_all"], env=no_server)
    assert relabelled.output == local.output.replace("run 2: slurm-2.out", "run 1: slurm-1.out")
    refused = runner.invoke(
        app, [*remote, "relabel", "1", "--collective", "all_gather", "--from", "unknown"], env=no_server
    )
    assert refused.exit_code == 2
    assert refused.output.strip() == (
        "error: collectives: run 1 has no collective 'unknown'; it has all_to_all "
        f"(HTTP 422 from {accounts_server.url})"
    )
