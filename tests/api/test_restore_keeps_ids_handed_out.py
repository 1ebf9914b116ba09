"""After `emuplan restore`, new runs, comparisons and share links get ids the replaced database never handed
out: a link to a run imported after the backup (gone with the restore) finds nothing, not a newcomer."""

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from paths import SHARED_NCCL

runner = CliRunner()


def imported(path: str, name: str) -> None:
    result = runner.invoke(app, ["import", path, "--name", name])
    assert result.exit_code == 0, result.output


def test_ids_handed_out_after_the_backup_are_not_handed_out_again_after_a_restore(
    cli_env, client: TestClient, tmp_path
) -> None:
    imported(str(SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"), "kept")
    assert runner.invoke(app, ["backup", str(tmp_path / "copy.sqlite3")]).exit_code == 0
    imported(str(SHARED_NCCL / "b200-allreduce-2.17.6.txt"), "later")
    comparison = client.post("/api/comparisons", json={"name": "kept vs later", "run_ids": [1, 2]}).json()
    token = client.post(f"/api/comparisons/{comparison['id']}/shares", json={}).json()["token"]

    restored = runner.invoke(app, ["restore", str(tmp_path / "copy.sqlite3"), "--yes"])
    assert restored.exit_code == 0, restored.output
    imported(str(SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"), "newcomer")
    newcomer = client.post("/api/comparisons", json={"name": "kept vs newcomer", "run_ids": [1, 3]}).json()

    assert [(run["id"], run["name"]) for run in client.get("/api/runs").json()] == [
        (3, "newcomer"),
        (1, "kept"),
    ]
    assert newcomer["id"] == comparison["id"] + 1
    assert client.get("/api/runs/2").status_code == 404
    assert client.get(f"/api/shared/{token}").status_code == 404
    stats = runner.invoke(app, ["stats", "2"])
    assert (stats.exit_code, stats.output) == (2, "error: run 2 does not exist\n")
