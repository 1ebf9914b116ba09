"""emuplan installed from its wheel, as `pip install emuplan-*.whl` leaves it, outside the source tree:
`emuplan serve` migrates its database and serves pages and static files from the package alone."""

import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import httpx2
import pytest

from paths import REPO_ROOT
from ports import free_port

# Each build and install step, on a loaded machine (a wheel builds in ~5 s): a hung pip fails the test.
STEP_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout (hatchling, already in the test environment: no network)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", out, REPO_ROOT],
        check=True,
        timeout=STEP_TIMEOUT_S,
    )
    (built,) = out.glob("emuplan-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the wheel; its dependencies come from the test environment's
    site-packages, added as a plain path so that the checkout's editable install (a .pth there) stays out."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=STEP_TIMEOUT_S)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = Path(subprocess.check_output([venv / "bin/python", "-c", where], text=True).strip())
    (purelib / "test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "--quiet", "--no-deps", wheel],
        check=True,
        timeout=STEP_TIMEOUT_S,
    )
    return venv


def test_the_wheel_carries_templates_static_files_and_migrations(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "emuplan/frontend/templates/base.html",
        "emuplan/frontend/static/app.css",
        "emuplan/migrations/env.py",
        "emuplan/migrations/versions/0001_initial.py",
        "emuplan/workload/chakra/et_def.proto",
    } <= names
    assert not [name for name in names if "__pycache__" in name]


def test_an_installed_emuplan_serves_from_any_directory(installed: Path, tmp_path: Path):
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    # Nothing of the checkout on the path: no PYTHONPATH, and none of the tests' EMUPLAN_* settings.
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith(("EMUPLAN_", "PYTHONPATH"))},
        "EMUPLAN_DEMO": "false",
        "EMUPLAN_ALLOWED_HOSTS": "127.0.0.1",
    }
    package = subprocess.check_output(
        [installed / "bin/python", "-c", "import emuplan; print(emuplan.__file__)"], cwd=workdir, env=env, text=True
    )
    assert package.startswith(str(installed))
    port = free_port()
    server = subprocess.Popen(
        [installed / "bin/emuplan", "serve", "--port", str(port)],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        home = _wait_for(f"http://127.0.0.1:{port}/", server)
        assert home.status_code == 200
        assert "emuplan" in home.text
        stylesheet = next(line for line in home.text.splitlines() if "app.css" in line).split('href="')[1].split('"')[0]
        assert httpx2.get(f"http://127.0.0.1:{port}{stylesheet}").status_code == 200
        assert httpx2.get(f"http://127.0.0.1:{port}/runs").status_code == 200
        # The database went where a user would look for it: ./data under the directory `serve` ran in.
        assert (workdir / "data" / "emuplan.sqlite3").is_file()
    finally:
        server.terminate()
        server.wait(timeout=20)


def _wait_for(url: str, server: subprocess.Popen) -> httpx2.Response:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"emuplan serve exited with {server.returncode}:\n{server.stdout.read()}")
        try:
            return httpx2.get(url)
        except httpx2.TransportError:
            time.sleep(0.2)
    pytest.fail(f"{url} did not answer within 60 s")
