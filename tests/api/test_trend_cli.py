"""`emuplan trend`: the nightly series (tests/nightly.py) on the configured database, the same figures and JSON as
GET /api/trend."""

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.store.db import Database
from nightly import GIB, PLATFORM, import_nights

pytestmark = pytest.mark.both_databases

runner = CliRunner()


def test_the_cli_flags_the_sixth_night_as_the_api_does(cli_env, client: TestClient, database: Database) -> None:
    ids = import_nights(database)
    printed = runner.invoke(app, ["trend", "--platform", PLATFORM, "--sizes", str(GIB), "--json"])
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.output) == client.get("/api/trend", params={"platform": PLATFORM, "sizes": GIB}).json()

    text = runner.invoke(app, ["trend", "--platform", PLATFORM, "--sizes", str(GIB), "--tag", "nightly"])
    assert text.exit_code == 0, text.output
    lines = [line.strip() for line in text.output.splitlines()]
    assert lines[:2] == [
        f"{PLATFORM} · all_reduce: 8 runs",
        f"quiet: run #{ids[7]} stays within the noise band of the runs before it on every figure",
    ]
    at_gib = lines[lines.index("busbw at 1 GiB") + 2 :][:8]
    assert [line.split()[-1] for line in at_gib] == ["band"] + ["within"] * 4 + ["regression"] + ["within"] * 2
    assert at_gib[5].split()[:6] == [f"#{ids[5]}", "night", "6", "2026-11-06", "02:00", "262.12"]
    assert at_gib[5].split()[6:9] == ["282.97–312.75", "-12.0", "regression"]


def test_the_morning_after_leads_with_the_regression(cli_env, database: Database) -> None:
    import_nights(database, 6)
    printed = runner.invoke(app, ["trend", "--platform", PLATFORM, "--sizes", str(GIB)])
    text = [line.strip() for line in printed.output.splitlines()]
    assert text[1] == "busbw at 1 GiB regression: -12.0 % from the median"
    first = text[text.index("What changed since the previous run") + 2].split()
    assert first[:4] == ["busbw", "at", "1", "GiB"]
    assert first[-1] == "regression"


def test_an_unknown_platform_exits_2_with_its_message(cli_env) -> None:
    printed = runner.invoke(app, ["trend", "--platform", "h900"])
    assert printed.exit_code == 2
    assert "no platform named 'h900'" in printed.output
