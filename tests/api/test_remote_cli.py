"""`emuplan --server URL --token T import / runs / stats / compare / plan --save` against a real server with
sign-in on: the same output as the local commands on the same database, the server's errors with exit 2."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from sqlmodel import func, select
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.roles import Role
from emuplan.store import accounts as store
from emuplan.store.db import Database
from emuplan.store.tables import Plan, Run
from live_server import LiveServer
from paths import RESULTS, SHARED_NCCL

runner = CliRunner()


def local(*args: str):
    return runner.invoke(app, list(args), env={"EMUPLAN_SERVER": None, "EMUPLAN_TOKEN": None})


def token_for(database: Database, add_account, name: str, role: Role) -> str:
    add_account(name, role)
    with database.writing() as session:
        return store.create_api_token(session, store.get_account(session, name).id, "test", None)[1]


def remote(server: LiveServer, token: str | None, *args: str):
    options = ["--server", server.url] + (["--token", token] if token else [])
    return runner.invoke(app, [*options, *args], env={"EMUPLAN_SERVER": None, "EMUPLAN_TOKEN": None})


def runs_stored(database: Database) -> int:
    with database.read_session() as session:
        return session.exec(select(func.count()).select_from(Run)).one()


def test_remote_commands_print_what_the_local_ones_print(
    accounts_server: LiveServer, add_account, database: Database, cli_env
) -> None:
    token = token_for(database, add_account, "ed", Role.editor)
    imported = remote(accounts_server, token, "import", str(RESULTS / "generated-per-iteration.csv"), "--tag", "demo")
    assert imported.exit_code == 0, imported.output
    assert imported.output.startswith("run 1: generated-per-iteration.csv (per-iteration, 2000 samples")
    second = remote(
        accounts_server, token, "import", str(SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"), "--name", "V100 bcast"
    )
    assert second.output.startswith("run 2: V100 bcast (nccl-tests, 62 samples, 12 ranks on 1 host)")
    as_json = json.loads(remote(accounts_server, token, "runs", "--json").output)
    assert [(run["id"], run["name"], run["tags"]) for run in as_json] == [
        (2, "V100 bcast", []),
        (1, "generated-per-iteration.csv", ["demo"]),
    ]
    # The local commands read the same database the server writes: every output is the same.
    for command in (
        ["runs"],
        ["runs", "--json"],
        ["runs", "--tag", "demo"],
        ["stats", "1"],
        ["stats", "2", "--link-gbps", "400", "--ranks", "8"],
        ["stats", "1", "--json"],
        ["compare", "1", "2", "--baseline", "2"],
        ["compare", "1", "2", "--json"],
    ):
        over_http = remote(accounts_server, token, *command)
        assert over_http.exit_code == 0, (command, over_http.output)
        if "--json" in command:  # the API's response models order the keys their own way
            assert json.loads(over_http.output) == json.loads(local(*command).output), command
        else:
            assert over_http.output == local(*command).output, command


def test_the_server_and_token_come_from_the_environment_too(
    accounts_server: LiveServer, add_account, database: Database
) -> None:
    token = token_for(database, add_account, "vi", Role.viewer)
    result = runner.invoke(app, ["runs", "--json"], env={"EMUPLAN_SERVER": accounts_server.url, "EMUPLAN_TOKEN": token})
    assert (result.exit_code, json.loads(result.output)) == (0, [])


def test_plan_save_plans_and_stores_on_the_server_with_the_local_output(
    accounts_server: LiveServer, add_account, database: Database, cli_env
) -> None:
    token = token_for(database, add_account, "ed", Role.editor)
    options = ["plan", "--model", "fashion-mnist-mlp", "--strategy", "pipeline", "--epochs", "2"]
    saved = remote(accounts_server, token, *options, "--save", "--name", "remote seed")
    assert saved.exit_code == 0, saved.output
    assert saved.output == local(*options).output + "saved plan id 1\n"
    with database.read_session() as session:
        plan = session.exec(select(Plan)).one()
    assert (plan.name, plan.strategy, plan.request) == (
        "remote seed",
        "pipeline",
        {"model": "fashion-mnist-mlp", "strategy": "pipeline", "epochs": 2},
    )
    as_json = json.loads(remote(accounts_server, token, *options, "--save", "--json").output)
    assert as_json == {"id": 2, **json.loads(local(*options, "--json").output)}


def test_errors_print_the_servers_message_and_exit_2_changing_nothing(
    accounts_server: LiveServer, add_account, database: Database, tmp_path: Path
) -> None:
    viewer = token_for(database, add_account, "vi", Role.viewer)
    editor = token_for(database, add_account, "ed", Role.editor)
    bad_file = tmp_path / "bad.csv"
    bad_file.write_text("iteration,size,collective,time_ms\n0,1024,all_reduce,1e306\n")
    url = accounts_server.url
    cases = {
        (None, "runs"): "error: Sign in first: this server lets only its accounts in. Open /sign-in in a browser; "
        f"scripts and the CLI send an API token as 'Authorization: Bearer TOKEN'. (HTTP 401 from {url})\n",
        ("emu_" + "x" * 43, "runs"): "error: The API token is unknown, expired or revoked: make a new one on /account "
        f"or with `emuplan users token`. (HTTP 401 from {url})\n",
        (
            viewer,
            "import",
            str(RESULTS / "generated-fct.txt"),
        ): "error: This needs the editor role (read, plan, upload, "
        "measure and share); the account 'vi' has the viewer role. An admin can change it with "
        f"`emuplan users role NAME ROLE`. (HTTP 403 from {url})\n",
        (editor, "stats", "99"): f"error: run 99 does not exist (HTTP 404 from {url})\n",
        (editor, "compare", "1", "2"): f"error: run 1 does not exist (HTTP 404 from {url})\n",
    }
    for (token, *arguments), message in cases.items():
        result = remote(accounts_server, token, *arguments)
        assert (result.exit_code, result.output) == (2, message), arguments
    refused = remote(accounts_server, editor, "import", str(bad_file))
    assert refused.exit_code == 2
    assert refused.output.startswith("error: bad.csv")
    assert refused.output.endswith(f"(HTTP 400 from {url})\n")
    assert runs_stored(database) == 0
    unreachable = remote(LiveServer("http://127.0.0.1:9", None, None, None), editor, "runs")  # type: ignore[arg-type]
    assert unreachable.exit_code == 2
    assert unreachable.output.startswith("error: cannot reach http://127.0.0.1:9: ")
    local_file = remote(accounts_server, editor, "plan", "--model", str(tmp_path / "config.json"), "--save")
    assert local_file.exit_code == 2
    assert "with --server give a preset, or model:ID of a model uploaded to that server" in local_file.output
    not_a_url = runner.invoke(app, ["--server", "host:8000", "runs"])
    assert not_a_url.exit_code == 2
    assert "Invalid value for --server: 'host:8000': give the server's URL, e.g." in not_a_url.output


def emuplan(*arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = [str(Path(sys.executable).with_name("emuplan")), *arguments]
    return subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, timeout=300)


def test_an_upload_shows_its_progress_on_a_terminal_or_with_progress_and_is_quiet_in_scripts(
    accounts_server: LiveServer, add_account, database: Database, tmp_path: Path
) -> None:
    token = token_for(database, add_account, "ed", Role.editor)
    server = {"EMUPLAN_SERVER": accounts_server.url, "EMUPLAN_TOKEN": token}
    files = []
    for index in range(3):
        files.append(tmp_path / f"big-{index}.csv")
        rows = "".join(f"{i},1048576,all_reduce,{1 + (i % 97) / 1000:.3f}\n" for i in range(index, 100_000))
        files[-1].write_text("iteration,size,collective,time_ms\n" + rows)
    size_mb = files[0].stat().st_size / 1e6
    # rich draws its bar only on a terminal: these variables make it treat the pipe as one.
    terminal = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "100"}
    on_terminal = emuplan("import", str(files[0]), env=server | terminal)
    assert on_terminal.returncode == 0, on_terminal.stderr
    assert on_terminal.stdout.startswith("run 1: big-0.csv (per-iteration, 100000 samples)")
    assert "uploading big-0.csv" in on_terminal.stderr
    assert f"{size_mb:.1f}/{size_mb:.1f} MB" in on_terminal.stderr
    assert re.search(r"\d+\.\d [kMG]?B/s", on_terminal.stderr)  # the rate
    # A script's stderr stays empty; --progress prints lines there, the last one when every byte was read.
    in_a_script = emuplan("import", str(files[1]), env=server)
    assert (in_a_script.returncode, in_a_script.stderr) == (0, "")
    assert in_a_script.stdout.startswith("run 2: big-1.csv (per-iteration, 99999 samples)")
    forced = emuplan("import", str(files[2]), "--progress", env=server)
    assert forced.returncode == 0, forced.stderr
    size_mb = files[2].stat().st_size / 1e6
    assert re.fullmatch(
        rf"uploading big-2\.csv: {size_mb:.1f} of {size_mb:.1f} MB \(100 %\), \d+\.\d MB/s",
        forced.stderr.splitlines()[-1],
    )
    assert runs_stored(database) == 3


def test_a_jobs_files_go_in_one_upload_as_one_observed_run(
    accounts_server: LiveServer, add_account, database: Database
) -> None:
    token = token_for(database, add_account, "ed", Role.editor)
    job = [
        RESULTS / "nccl-inspector" / name for name in ("constructed-gpu-a-pid101.log", "constructed-gpu-b-pid202.log")
    ]
    imported = remote(accounts_server, token, "import", "--job", *map(str, job), "--json")
    assert imported.exit_code == 0, imported.output
    run = json.loads(imported.stdout)
    assert (run["id"], run["origin"], run["file_name"], run["ranks"], run["hosts"]) == (
        1,
        "observed",
        "constructed-gpu-a-pid101.log and 1 more",
        2,
        2,
    )
    logs = [str(RESULTS / "generated-fct.txt"), str(RESULTS / "generated-per-iteration.csv")]
    refused = remote(accounts_server, token, "import", "--job", *logs)
    assert (refused.exit_code, refused.output) == (
        2,
        "error: generated-fct.txt: neither an NCCL Inspector dump nor a PyTorch profiler trace "
        f"(HTTP 400 from {accounts_server.url})\n",
    )
    assert runs_stored(database) == 1


def test_a_remote_import_streams_the_file_instead_of_reading_it_whole(
    accounts_server: LiveServer, add_account, database: Database, tmp_path: Path
) -> None:
    token = token_for(database, add_account, "ed", Role.editor)
    sparse = tmp_path / "zeros.bin"
    with sparse.open("wb") as file:
        file.truncate(400 * 1024**2)
    # The CLI in a child of a child: RUSAGE_CHILDREN of the middle one is the CLI's peak resident memory alone.
    measure = (
        "import resource, subprocess, sys; "
        "code = subprocess.run(sys.argv[1:], capture_output=True).returncode; "
        "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)"
    )
    cli = [str(Path(sys.executable).with_name("emuplan")), "import", str(sparse)]
    env = {**os.environ, "EMUPLAN_SERVER": accounts_server.url, "EMUPLAN_TOKEN": token}
    result = subprocess.run([sys.executable, "-c", measure, *cli], capture_output=True, text=True, env=env, timeout=300)
    code, peak_bytes = map(int, result.stdout.split())
    assert code == 2  # 400: not a result file; all 400 MB went over the wire to be told so
    assert peak_bytes < 100 * 1024**2  # a quarter of the file: 45 MB when this was written
    assert runs_stored(database) == 0
