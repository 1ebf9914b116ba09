"""Every operation of /openapi.json, fuzzed by schemathesis against a real server with a fresh database:
no answer may be a server error, and every answer must be documented: its status, its content type and,
for JSON, its schema. The coverage phase sends each bounded number's edges and past them (epochs = 2^60
was a 500 before the plan request was bounded)."""

import subprocess
import sys
from pathlib import Path

import pytest

from live_server import LiveServer

pytestmark = pytest.mark.both_databases

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def test_no_operation_answers_a_server_error_or_off_its_schema(live_server: LiveServer) -> None:
    result = subprocess.run(
        [
            str(SCHEMATHESIS), "run", live_server.url + "/openapi.json",
            "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
            "response_schema_conformance",
            "--max-examples", "20", "--seed", "11", "--request-timeout", "60", "--no-color",
            "--phases", "examples,coverage,fuzzing",
        ],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:]
