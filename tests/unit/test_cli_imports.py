"""Commands import only what they use: `--help` and planning a preset load none of the heavy libraries.

Each runs in a fresh interpreter, as a user's shell would start it, and lists the heavy top-level
modules loaded by the time the command finished.
"""

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "scipy", "numpy", "pyarrow", "onnx", "plotly", "sqlalchemy", "sqlmodel", "alembic")
HEAVY += ("fastapi", "starlette", "uvicorn", "pydantic_settings")

# Modules that only one command needs: the rest start without them.
ONE_COMMAND_ONLY = ("yaml", "emuplan.measure.launcher", "emuplan.measure.workload", "emuplan.measure.torchrun")

# argv: the watched module names as JSON, then the command's arguments.
RUN_AND_LIST_LOADED = """
import json, sys
watched = json.loads(sys.argv[1])
from emuplan.cli import app
try:
    app(sys.argv[2:], prog_name="emuplan")
except SystemExit as exit:
    code = exit.code
print(json.dumps([code, sorted(m for m in watched if m in sys.modules)]), file=sys.stderr)
"""


def loaded_modules(
    watched: tuple[str, ...], *arguments: str, env: dict[str, str] | None = None
) -> tuple[int, list[str]]:
    """The command's exit status and which of ``watched`` it had loaded by the time it finished."""
    result = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST_LOADED, json.dumps(watched), *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    exit_code, modules = json.loads(result.stderr.strip().splitlines()[-1])
    return exit_code, modules


@pytest.mark.parametrize(
    "arguments",
    [
        ["--help"],
        ["plan", "--model", "fashion-mnist-mlp"],
        ["plan", "--model", "llama-3-70b", "--strategy", "hybrid", "--tp", "8", "--pp", "4", "--json"],
        ["plan", "--model", "gpt2", "--export", "yaml"],
        ["plan", "--help"],
        ["import", "--help"],
        ["measure", "--help"],
        ["serve", "--help"],
        ["users", "--help"],
        ["platforms", "--help"],
    ],
    ids=" ".join,
)
def test_command_loads_no_heavy_library(arguments: list[str]) -> None:
    assert loaded_modules(HEAVY, *arguments) == (0, [])


@pytest.mark.parametrize(
    "arguments",
    [["--help"], ["plan", "--model", "fashion-mnist-mlp"], ["measure", "--help"]],
    ids=" ".join,
)
def test_command_loads_no_other_commands_modules(arguments: list[str]) -> None:
    assert loaded_modules(ONE_COMMAND_ONLY, *arguments) == (0, [])


def test_help_loads_no_pydantic() -> None:
    # The options' help comes from plain data (workload.plan_options, measure.options); pydantic's models
    # are for the commands that plan or validate. (A command's own --help loads it anyway: Typer's
    # parameter adapters import it.)
    assert loaded_modules(("pydantic",), "--help") == (0, [])


def test_a_command_that_needs_the_store_still_loads_it(tmp_path) -> None:
    database_url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    env = {"PATH": "/usr/bin:/bin", "EMUPLAN_DATABASE_URL": database_url}
    exit_code, modules = loaded_modules(HEAVY, "runs", env=env)
    assert exit_code == 0
    assert {"sqlalchemy", "sqlmodel", "alembic"} <= set(modules)


def test_the_server_app_loads_neither_scipy_nor_plotly_nor_onnx() -> None:
    # SciPy (~65 MB resident) is for comparisons only, onnx for ONNX uploads; figures are plain dicts, and
    # Plotly's bundle is found without importing it. So an idle server (and an import over HTTP) goes without.
    heavy = ("scipy", "plotly", "onnx")
    script = (
        f"import sys\nfrom emuplan.main import create_app\ncreate_app()\nprint(*[m in sys.modules for m in {heavy}])"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.split() == ["False", "False", "False"]
