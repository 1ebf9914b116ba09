"""``emuplan import`` of several files, ``emuplan runs`` filters and sorts, and the managing commands: ``runs
edit|delete``, ``plans [edit|delete]``, ``comparisons [edit|delete]`` (the same store calls as the API)."""

import json
import re
import shutil

import httpx2
import pytest
from typer.testing import CliRunner

from emuplan.cli import app
from paths import RESULTS, SHARED_NCCL

pytestmark = pytest.mark.both_databases

# Wide enough for every line whole (the temporary paths are long): tests/api/test_cli_fits.py reads the CLI at 80.
runner = CliRunner(env={"COLUMNS": "1000"})


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input)


def test_import_takes_many_files_and_globs_with_an_outcome_per_file(cli_env, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("a100-16rank-allreduce-2.17.txt", "v100-12gpu-broadcast-pre2.13.txt"):
        shutil.copy(SHARED_NCCL / name, logs / name)
    (logs / "broken.txt").write_text("not a result\n")
    first = invoke("import", str(logs / "a100-16rank-allreduce-2.17.txt"), "--json")
    assert first.exit_code == 0, first.output
    many = invoke("import", str(logs / "*.txt"), str(RESULTS / "generated-per-iteration.csv"), "--tag", "batch",
                  "--fact", "nic=ConnectX-6", str(tmp_path / "nothing-*.csv"))  # fmt: skip
    lines = many.output.splitlines()
    assert lines[0] == f"{tmp_path / 'nothing-*.csv'}: refused: no file matches"
    assert lines[1] == f"{logs / 'a100-16rank-allreduce-2.17.txt'}: duplicate of run #1 (not imported again)"
    assert lines[2].startswith(f"{logs / 'broken.txt'}: refused: broken.txt: ")
    assert lines[3:6] == [
        f"{logs / 'v100-12gpu-broadcast-pre2.13.txt'}: stored as run #2",
        f"{RESULTS / 'generated-per-iteration.csv'}: stored as run #3",
        "5 files: 2 stored, 1 duplicate, 2 refused",
    ]
    # Then each stored run's headline and verdict (its status as `emuplan check` judges it; reasons under it).
    status = {
        verdict["run_id"]: verdict["status"] for verdict in json.loads(invoke("check", "2", "3", "--json").output)
    }
    assert [line for line in lines[6:] if not line.startswith("    ")] == [
        "run 2 v100-12gpu-broadcast-pre2.13.txt:",
        "  broadcast: peak busbw 122.15 GB/s at 8,589,934,592 B out-of-place; average busbw 41.25 GB/s over 62 "
        "cells (log: 41.2456, agrees)",
        f"  verdict: {status[2]} (no platform)",
        "run 3 generated-per-iteration.csv:",
        "  p50 19,922.8 µs, p99 32,527.0 µs over 2,000 samples",
        f"  verdict: {status[3]} (no platform)",
    ]
    assert many.exit_code == 2  # not every file was stored
    stored = json.loads(invoke("runs", "--tag", "batch", "--json").output)
    assert [(run["id"], run["facts"]) for run in stored] == [(3, {"nic": "ConnectX-6"}), (2, {"nic": "ConnectX-6"})]
    named = invoke("import", str(logs / "*.txt"), "--name", "one name")
    assert (named.exit_code, named.output.strip()) == (
        2,
        "error: --name names one run: with several files each is named by its file name",
    )
    as_json = json.loads(invoke("import", str(logs / "v100-*.txt"), str(logs / "broken.txt"), "--json").output)
    assert [(o["outcome"], o["run_id"]) for o in as_json] == [("duplicate", 2), ("refused", None)]


def test_runs_filters_sorts_edits_and_deletes_a_run(cli_env):
    for path in (SHARED_NCCL / "a100-16rank-allreduce-2.17.txt", SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"):
        assert invoke("import", str(path), "--fact", "nic=ConnectX-6").exit_code == 0

    def listed(*options: str) -> list[int]:
        return [run["id"] for run in json.loads(invoke("runs", *options, "--json").output)]

    assert listed("--collective", "broadcast") == [2]
    assert listed("--ranks", "16") == [1]
    assert listed("--sort", "p50") == [2, 1]
    assert listed("--sort", "busbw") == [1, 2]
    assert listed("--sort", "collective") == [1, 2]  # all_reduce, broadcast
    assert listed("--sort", "verdict") == [2, 1]  # fail, pass
    assert listed("--sort", "platform") == [1, 2]  # neither names one: oldest first
    refused = invoke("runs", "--sort", "colour")
    assert (refused.exit_code, refused.output.strip()) == (
        2,
        "error: sort: 'colour' is not one of newest, oldest, name, p50, busbw, ranks, size, verdict, platform, "
        "collective",
    )
    assert listed("--search", "A100") == [1]
    edited = invoke("runs", "edit", "1", "--name", "A100 rail 3", "--tag", "rail-3", "--fact", "NIC=ConnectX-7",
                    "--fact", "nccl=2.17.1", "--note", "after the update")  # fmt: skip
    assert edited.exit_code == 0, edited.output
    assert edited.output.splitlines() == [
        "run 1: A100 rail 3",
        "  tags: rail-3; plan: none",
        "  facts: NIC = ConnectX-7, nccl = 2.17.1",
        "  note: after the update",
    ]
    assert listed("--fact", "nic=connectx-7") == [1]
    removed = json.loads(invoke("runs", "edit", "1", "--fact", "nccl=", "--no-tags", "--json").output)
    assert (removed["facts"], removed["tags"]) == ({"NIC": "ConnectX-7"}, [])
    assert invoke("runs", "edit", "1").output.strip().startswith("error: nothing to change")
    assert invoke("runs", "edit", "1", "--plan", "7").output.strip() == "error: no plan with id 7"

    assert invoke("comparisons").output == ""
    kept = invoke("runs", "delete", "1", input="n\n")
    assert kept.exit_code == 1 and "It is in no saved comparison. Delete run 1?" in kept.output
    assert listed() == [2, 1]
    deleted = invoke("runs", "delete", "1", "--yes")
    assert (deleted.exit_code, deleted.output) == (0, "deleted run 1\n")
    assert listed() == [2]


def test_plans_list_edit_and_delete_unlinking_their_runs(cli_env, client):
    plan_id = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "gpus": 4}).json()["id"]
    assert invoke("import", str(RESULTS / "generated-per-iteration.csv"), "--plan", str(plan_id)).exit_code == 0
    assert invoke("plans").output == f"{plan_id:>5}  fashion-mnist-mlp data (tutorial) (data, tutorial, 8 trials)\n"
    edited = invoke("plans", "edit", str(plan_id), "--name", "MLP on 4", "--tag", "baseline")
    assert edited.output == f"plan {plan_id}: MLP on 4; tags: baseline\n"
    assert json.loads(invoke("plans", "--json").output)[0]["tags"] == ["baseline"]
    client.post("/api/comparisons", json={"name": "read with it", "run_ids": [1], "plans": {"1": plan_id}})
    asked = invoke("plans", "delete", str(plan_id), input="y\n")
    assert asked.exit_code == 0, asked.output
    assert (
        "1 run is linked to it (#1): they will be unlinked. 1 saved comparison reads a run with it (#1 'read with "
        "it'): they will read it with its own plan. Delete plan 1?"
    ) in asked.output
    assert asked.output.endswith("deleted plan 1; unlinked 1 run\n")
    assert json.loads(invoke("runs", "--json").output)[0]["plan_id"] is None


def test_comparisons_list_edit_and_delete_with_their_share_links(cli_env, client):
    for path in (SHARED_NCCL / "a100-16rank-allreduce-2.17.txt", SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"):
        assert invoke("import", str(path)).exit_code == 0
    comparison_id = client.post("/api/comparisons", json={"name": "A vs V", "run_ids": [1, 2]}).json()["id"]
    client.post(f"/api/comparisons/{comparison_id}/shares", json={})
    assert invoke("comparisons").output == f"{comparison_id:>5}  A vs V (runs #1, #2)\n"
    assert invoke("comparisons", "edit", str(comparison_id), "--tag", "review").output == (
        f"comparison {comparison_id}: A vs V; tags: review\n"
    )
    asked = invoke("runs", "delete", "2", input="n\n")
    assert f"It is in 1 saved comparison (#{comparison_id} 'A vs V'): they show their other runs." in asked.output
    deleted = invoke("comparisons", "delete", str(comparison_id), input="y\n")
    assert "It has 1 share link (1 active): they are deleted with it; its runs stay." in deleted.output
    assert deleted.output.endswith(f"deleted comparison {comparison_id}\n")
    assert invoke("comparisons", "--json").output.strip() == "[]"


def test_a_comparisons_share_links_are_made_labelled_listed_and_revoked(cli_env, client):
    for path in (SHARED_NCCL / "a100-16rank-allreduce-2.17.txt", SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"):
        assert invoke("import", str(path)).exit_code == 0
    comparison_id = client.post("/api/comparisons", json={"name": "A vs V", "run_ids": [1, 2]}).json()["id"]
    assert invoke("comparisons", "shares", str(comparison_id)).output == (
        f"comparison {comparison_id} has no share link: emuplan comparisons share {comparison_id}\n"
    )
    made = invoke("comparisons", "share", str(comparison_id), "--label", "for ops", "--expires-in-days", "7")
    made_line, opens = made.output.splitlines()
    assert re.fullmatch(
        r"    1  active 'for ops'; made \d{4}-\d\d-\d\d \d\d:\d\d UTC, expires \d{4}-\d\d-\d\d \d\d:\d\d UTC", made_line
    )
    path = re.fullmatch(r"  opens it, shown once: (/s/[\w-]+) after the dashboard's address", opens)[1]
    assert client.get(f"/api/shared/{path.removeprefix('/s/')}").json()["comparison"]["name"] == "A vs V"
    assert invoke("comparisons", "share", str(comparison_id)).exit_code == 0  # a second one, never expiring

    labelled = invoke("comparisons", "share-label", str(comparison_id), "1", "for the net team")
    assert labelled.output.startswith("    1  active 'for the net team'; made ")
    assert invoke("comparisons", "unshare", str(comparison_id), "1").output.startswith("    1  revoked 'for the ")
    assert client.get(f"/api/shared/{path.removeprefix('/s/')}").status_code == 410
    listed = invoke("comparisons", "shares", str(comparison_id)).output.splitlines()
    assert [line.split(";")[0] for line in listed] == ["    1  revoked 'for the net team'", "    2  active"]
    assert listed[1].endswith("UTC, never expires")
    links = json.loads(invoke("comparisons", "shares", str(comparison_id), "--json").output)
    assert [(link["id"], link["state"], link["label"]) for link in links] == [
        (1, "revoked", "for the net team"),
        (2, "active", ""),
    ]
    assert (
        invoke("comparisons", "unshare", str(comparison_id), "7").output == "error: comparison 1 has no share link 7\n"
    )


def test_the_managing_commands_work_the_same_against_a_server_by_the_roles_it_allows(
    accounts_server, database, cli_env, tmp_path
) -> None:
    from emuplan.roles import Role
    from emuplan.store import accounts

    def token(name: str, role: Role) -> str:
        with database.writing() as session:
            account, _ = accounts.create_account(session, name, role)
            return accounts.create_api_token(session, account.id, "cli", None)[1]

    def remote(secret: str, *args: str, input: str | None = None):
        env = {"EMUPLAN_SERVER": None, "EMUPLAN_TOKEN": None}
        return runner.invoke(app, ["--server", accounts_server.url, "--token", secret, *args], env=env, input=input)

    editor, admin = token("ed", Role.editor), token("ad", Role.admin)
    broken = tmp_path / "broken.txt"
    broken.write_text("not a result\n")
    a100 = SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"
    copy = tmp_path / "copy.txt"
    shutil.copy(a100, copy)
    many = remote(editor, "import", str(a100), str(broken), str(copy), str(a100), "--fact", "nic=ConnectX-6")
    lines = many.output.splitlines()
    assert lines[0] == f"{a100}: stored as run #1"
    assert lines[1].startswith(f"{broken}: refused: broken.txt: ") and lines[1].endswith(
        f"(HTTP 400 from {accounts_server.url})"
    )
    assert lines[2] == f"{copy}: duplicate of run #1 (not imported again)"  # a100 given twice is imported once
    assert (lines[3], many.exit_code) == ("3 files: 1 stored, 1 duplicate, 1 refused", 2)
    edited = remote(editor, "runs", "edit", "1", "--fact", "nccl=2.17.1", "--json")
    assert json.loads(edited.output)["facts"] == {"nic": "ConnectX-6", "nccl": "2.17.1"}
    assert [r["id"] for r in json.loads(remote(editor, "runs", "--fact", "NCCL=2.17.1", "--json").output)] == [1]
    refused = remote(editor, "runs", "delete", "1", "--yes")
    assert refused.exit_code == 2 and "This needs the admin role" in refused.output
    # Share links: an editor makes, labels and revokes them; a viewer lists them and is refused making one.
    saved = httpx2.post(
        f"{accounts_server.url}/api/comparisons",
        json={"name": "A100", "run_ids": [1]},
        headers={"Authorization": f"Bearer {editor}"},
    )
    comparison_id = str(saved.json()["id"])
    made = remote(editor, "comparisons", "share", comparison_id, "--label", "for ops").output.splitlines()
    address = made[1].removeprefix("  opens it, shown once: ")
    assert address.startswith(f"{accounts_server.url}/s/") and httpx2.get(address).status_code == 200
    viewer = token("vi", Role.viewer)
    assert remote(viewer, "comparisons", "shares", comparison_id).output.startswith("    1  active 'for ops'; made ")
    refused_share = remote(viewer, "comparisons", "share", comparison_id)
    assert refused_share.exit_code == 2 and "This needs the editor role" in refused_share.output
    assert remote(editor, "comparisons", "share-label", comparison_id, "1", "ops").output.startswith(
        "    1  active 'ops'"
    )
    assert remote(editor, "comparisons", "unshare", comparison_id, "1").output.startswith("    1  revoked 'ops'")
    assert httpx2.get(address).status_code == 410
    deleted = remote(admin, "runs", "delete", "1", input="y\n")
    assert f"It is in 1 saved comparison (#{comparison_id} 'A100'): they show their other runs." in deleted.output
    assert deleted.output.endswith("deleted run 1\n")
    assert json.loads(remote(editor, "runs", "--json").output) == []
