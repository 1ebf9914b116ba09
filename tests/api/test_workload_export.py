"""The Chakra workload export through the API (a zip) and the CLI (a folder): same bundle, clear errors."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.services.workload_export import wanted_ranks
from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.bundle import attribute, decode_trace
from emuplan.workload.chakra.schedule import ExportError
from live_server import LiveServer
from ports import free_port

pytestmark = pytest.mark.both_databases
runner = CliRunner(env={"EMUPLAN_SERVER": None, "EMUPLAN_TOKEN": None})


def remote(server: LiveServer, *args: str):
    return runner.invoke(app, ["--server", server.url, *args])


SEED_DATA_PARALLEL = {"model": "fashion-mnist-mlp", "strategy": "data", "mode": "framework", "gpus": 4}


def create_plan(client: TestClient, body: dict) -> int:
    response = client.post("/api/plans", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def seed_all_reduce_sizes(files: dict[str, bytes]) -> dict[str, list[int]]:
    sizes = {}
    for name, content in files.items():
        if name.endswith(".et"):
            _, nodes = decode_trace(content)
            sizes[name] = [attribute(n, "comm_size") for n in nodes if n.type == et.COMM_COLL_NODE]
    return sizes


def test_api_zip_holds_every_rank_the_groups_and_a_readme(client: TestClient) -> None:
    plan_id = create_plan(client, SEED_DATA_PARALLEL)
    response = client.get(f"/api/plans/{plan_id}/workload", params={"format": "chakra"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    assert response.headers["content-disposition"] == f'attachment; filename="plan-{plan_id}-chakra.zip"'
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    assert sorted(files) == [
        "README.txt", "comm_group_names.json", "comm_groups.json",
        "workload.0.et", "workload.1.et", "workload.2.et", "workload.3.et",
    ]  # fmt: skip
    assert seed_all_reduce_sizes(files) == {f"workload.{rank}.et": [971048] for rank in range(4)}
    assert json.loads(files["comm_groups.json"]) == {"1": [0, 1, 2, 3]}
    assert f"saved plan #{plan_id}" in files["README.txt"].decode()

    every = client.get(f"/api/plans/{plan_id}/workload", params={"format": "chakra", "ranks": "all"})
    with zipfile.ZipFile(io.BytesIO(every.content)) as archive:
        assert {name: archive.read(name) for name in archive.namelist()} == files
    two = client.get(f"/api/plans/{plan_id}/workload", params={"format": "chakra", "ranks": "1-2", "gpu": "b200"})
    with zipfile.ZipFile(io.BytesIO(two.content)) as archive:
        assert sorted(n for n in archive.namelist() if n.endswith(".et")) == ["workload.1.et", "workload.2.et"]
        assert "NVIDIA B200 dense bf16 peak 2250 TFLOP/s" in archive.read("README.txt").decode()


def test_all_is_every_rank_up_to_what_a_bundle_holds() -> None:
    assert wanted_ranks("all", 4) == [0, 1, 2, 3]
    assert wanted_ranks(" ALL ", 16384) == list(range(16384))
    assert wanted_ranks("0,2-3", 4) == [0, 2, 3]
    with pytest.raises(ExportError, match="^ranks: more than 16384 ranks in one bundle; ask for fewer$"):
        wanted_ranks("all", 32768)


def test_api_errors_name_the_field(client: TestClient) -> None:
    plan_id = create_plan(client, SEED_DATA_PARALLEL)
    tutorial_id = create_plan(client, {"model": "fashion-mnist-mlp", "strategy": "data"})
    url = f"/api/plans/{plan_id}/workload"
    cases = [
        (url, {"format": "astra"}, 422, "format: unknown workload format 'astra'; use one of: chakra"),
        (url, {"format": "chakra", "ranks": "0-4"}, 422, "ranks: rank 4 is outside 0-3 (the plan has 4 GPUs)"),
        (url, {"format": "chakra", "gpu": "v100"}, 422, "gpu: unknown GPU 'v100'; known: h100-sxm, h200, a100, b200"),
        (url, {"format": "chakra", "utilisation": "0"}, 422, "utilisation: must be in (0, 1], got 0.0"),
        (f"/api/plans/{tutorial_id}/workload", {"format": "chakra"}, 422, None),
        ("/api/plans/999/workload", {"format": "chakra"}, 404, None),
    ]
    for path, params, status, detail in cases:
        response = client.get(path, params=params)
        assert response.status_code == status, (params, response.text)
        if detail is not None:
            assert response.json()["detail"] == detail
    assert (
        client.get(f"/api/plans/{tutorial_id}/workload", params={"format": "chakra"})
        .json()["detail"]
        .startswith("mode: a Chakra trace follows the framework's schedule")
    )


def test_cli_writes_the_same_bundle_into_a_folder(client: TestClient, cli_env: str, tmp_path: Path) -> None:
    plan_id = create_plan(client, SEED_DATA_PARALLEL)
    out = tmp_path / "traces"
    result = runner.invoke(app, ["export-workload", str(plan_id), "--format", "chakra", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote 4 trace file(s) and 3 other file(s) to {out}\n"
    files = {path.name: path.read_bytes() for path in out.iterdir()}
    assert seed_all_reduce_sizes(files) == {f"workload.{rank}.et": [971048] for rank in range(4)}
    api_zip = client.get(f"/api/plans/{plan_id}/workload", params={"format": "chakra"}).content
    with zipfile.ZipFile(io.BytesIO(api_zip)) as archive:
        assert {name: archive.read(name) for name in archive.namelist()} == files

    missing = runner.invoke(app, ["export-workload", "999", "--out", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "plan" in missing.stderr and "999" in missing.stderr
    assert not (tmp_path / "none").exists()


def zip_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_cli_streams_the_zip_to_a_file_and_fetches_it_from_a_server(
    client: TestClient, live_server: LiveServer, cli_env: str, tmp_path: Path
) -> None:
    plan_id = create_plan(client, SEED_DATA_PARALLEL)
    api_zip = client.get(f"/api/plans/{plan_id}/workload", params={"format": "chakra", "ranks": "1-2"}).content
    with zipfile.ZipFile(io.BytesIO(api_zip)) as archive:
        expected = {name: archive.read(name) for name in archive.namelist()}
    assert sorted(expected) == [
        "README.txt", "comm_group_names.json", "comm_groups.json", "workload.1.et", "workload.2.et"
    ]  # fmt: skip
    # Without a server: the local database's bundle, zipped as the API zips it.
    local_zip = tmp_path / "local" / "bundle.zip"
    local = runner.invoke(app, ["export-workload", str(plan_id), "--ranks", "1-2", "--out", str(local_zip)])
    assert local.stdout == f"wrote 2 trace file(s) and 3 other file(s) to {local_zip}\n"
    assert zip_members(local_zip) == expected  # not the bytes: a member's time stamp is the time it was zipped
    # With --server: the server's zip streamed to disk, or unpacked into a folder.
    remote_zip, remote_folder = tmp_path / "remote.zip", tmp_path / "remote"
    for out in (remote_zip, remote_folder):
        result = remote(live_server, "export-workload", str(plan_id), "--ranks", "1-2", "--out", str(out))
        assert result.exit_code == 0, result.output
        assert result.stdout == f"wrote 2 trace file(s) and 3 other file(s) to {out}\n"
    assert zip_members(remote_zip) == expected
    assert {path.name: path.read_bytes() for path in remote_folder.iterdir()} == expected
    # The server's refusal, as the local command words it, and nothing written.
    refused = remote(live_server, "export-workload", str(plan_id), "--ranks", "0-4", "--out", str(tmp_path / "no.zip"))
    assert (refused.exit_code, refused.stderr) == (
        2, f"error: ranks: rank 4 is outside 0-3 (the plan has 4 GPUs) (HTTP 422 from {live_server.url})\n"
    )  # fmt: skip
    assert not (tmp_path / "no.zip").exists()
    unreachable = runner.invoke(
        app, ["--server", f"http://127.0.0.1:{free_port()}", "export-workload", "1", "--out", str(tmp_path / "no.zip")]
    )
    assert unreachable.exit_code == 2 and unreachable.stderr.startswith("error: cannot reach http://127.0.0.1:")
    assert not (tmp_path / "no.zip").exists()
