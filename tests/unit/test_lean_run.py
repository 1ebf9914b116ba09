"""`make run` installs only what serving needs: the package without the test and bench extras, and none of the
Debian packages only the tests use (Chromium, PostgreSQL); `make test` and `make bench` add theirs. Read from
make's own dry run (`make -n`, which prints the recipes a fresh clone would run) in a copy of the Makefile with
no .venv beside it."""

import os
import shutil
import subprocess
from pathlib import Path

from paths import REPO_ROOT


def dry_run(tmp_path: Path, target: str) -> str:
    shutil.copy(REPO_ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("")
    # Run from `make test` (CI's way) this is a sub-make: without the parent's level and flags it prints the
    # recipes alone, as from a shell, not wrapped in "Entering directory" lines.
    environment = {key: value for key, value in os.environ.items() if key not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", target],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    return result.stdout


def test_make_run_installs_only_what_serving_needs(tmp_path: Path) -> None:
    run = dry_run(tmp_path, "run")
    assert "pip install --quiet -e .\n" in run
    for extra_or_test_package in ("[test", "bench]", "chromium", "postgresql"):
        assert extra_or_test_package not in run, extra_or_test_package
    assert "bubblewrap" in run  # the sandbox of uploaded PyTorch source serves too
    assert run.rstrip().endswith(".venv/bin/emuplan serve")


def test_make_test_and_bench_add_their_extras_and_packages(tmp_path: Path) -> None:
    test = dry_run(tmp_path, "test")
    assert "pip install --quiet -e '.[test]'" in test and "chromium" in test and "postgresql" in test
    bench = dry_run(tmp_path, "bench")
    assert "pip install --quiet -e '.[test,bench]'" in bench and "postgresql" in bench
