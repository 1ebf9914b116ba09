"""What sign-in costs a request: `/api/runs` and `/runs` from `emuplan serve` with EMUPLAN_AUTH=accounts
(an API token looked up by its SHA-256 on every request) against the same database with sign-in off.

Target: each within 1.25× of the same request without sign-in, as the median of per-round ratios
(two servers asked in the same rounds, order rotating).

    .venv/bin/python bench/bench_auth.py [--rounds R] [--runs N]
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_pages import upload_runs
from paired import load_average, median_get_seconds, paired_rounds, ratio_line
from serve import server_env, start_server, stop_server

PATHS = ("/api/runs", "/runs")
RATIO_LIMIT = 1.25
REQUESTS_PER_SAMPLE = 9
EMUPLAN = str(Path(sys.executable).with_name("emuplan"))


def make_token(directory: str) -> str:
    """An editor account and its API token, made with the CLI on the database the server will use."""
    env = server_env(directory)
    subprocess.run([EMUPLAN, "users", "add", "bench", "--role", "editor"], env=env, check=True, capture_output=True)
    made = subprocess.run([EMUPLAN, "users", "token", "bench"], env=env, check=True, capture_output=True, text=True)
    return made.stdout.rsplit(" ", 1)[1].strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        off_dir, on_dir = Path(directory) / "off", Path(directory) / "on"
        off_dir.mkdir()
        on_dir.mkdir()
        server, base = start_server(str(off_dir))
        try:
            upload_runs(base, 2_000, args.runs)
        finally:
            stop_server(server)
        shutil.copy(off_dir / "bench.sqlite3", on_dir / "bench.sqlite3")
        token = make_token(str(on_dir))
        servers = {"off": start_server(str(off_dir)), "on": start_server(str(on_dir), EMUPLAN_AUTH="accounts")}
        headers = {"off": {}, "on": {"Authorization": f"Bearer {token}"}}
        try:
            print(f"sign-in on vs off, {args.runs} runs, {args.rounds} paired rounds, median of "
                  f"{REQUESTS_PER_SAMPLE} GETs each (load {load_average()})")  # fmt: skip
            cases = {
                (path, auth): lambda path=path, auth=auth: median_get_seconds(
                    servers[auth][1] + path, REQUESTS_PER_SAMPLE, headers[auth]
                )
                for path in PATHS
                for auth in servers
            }
            values = paired_rounds(cases, args.rounds)
        finally:
            for process, _ in servers.values():
                stop_server(process)
    failed = False
    for path in PATHS:
        line, ok = ratio_line(path, ("off", values[(path, "off")]), ("on", values[(path, "on")]), RATIO_LIMIT)
        print(line)
        failed |= not ok
    print(f"  load average after: {load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
