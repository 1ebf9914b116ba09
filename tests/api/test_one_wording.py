"""The page and the CLI word the same run alike: its headline figures (thousands separators and units), the
link speed never claimed where the fallback is not applied, an inferred rank count called inferred, and the
sweep comparison's verdict line word for word."""

import re

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from slower_sweep import B200_LOG, b200_slower_log

pytestmark = pytest.mark.both_databases


def _text(page: str) -> str:
    """A page's main text as a reader sees it: tags dropped, entities and whitespace as displayed."""
    main = page.split("<main>")[1].split("</main>")[0]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", main)).replace("&#39;", "'")


def test_the_page_and_the_cli_word_a_sweep_alike(client: TestClient, cli_env, tmp_path) -> None:
    slower = tmp_path / "b200-slower.txt"
    slower.write_bytes(b200_slower_log())
    for path in (B200_LOG, slower):
        assert client.post("/api/runs", files={"file": (path.name, path.read_bytes())}).status_code == 201
    runner = CliRunner(env={"COLUMNS": "1000"})
    page = _text(client.get("/runs/1").text)
    cli = runner.invoke(app, ["stats", "1"]).output
    for both in (
        "702.91 GB/s at 2,147,483,648 B",  # the peak and its size
        "137.18 GB/s over 58 cells",  # the average, and that it averages the cells
        "no link speed given",  # the fallback 100 Gbit/s is not applied, so not claimed
    ):
        assert both in page and both in cli, both
    assert "Ranks · inferred from the file's busbw/algbw factor" in page and "ranks 16 (inferred)" in cli
    assert "Gbit/s per rank (settings)" not in cli

    verdict = client.get("/api/compare", params={"runs": "1,2"}).json()["sweep"]["runs"][1]["verdict"]
    assert verdict.startswith("#2 vs #1: −20.0 % busbw at 3 sizes (512 MiB–2 GiB)")
    assert f"  {verdict}" in runner.invoke(app, ["compare", "1", "2"]).output.splitlines()
