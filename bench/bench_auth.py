"""What sign-in costs a request: `/api/runs` and `/runs` from `emuplan serve` with EMUPLAN_AUTH=accounts
(an API token looked up by its SHA-256 on every request) against the same database with sign-in off.

Target: each within 1.25× of the same request without sign-in, as the median of per-round ratios
(two servers asked in the same rounds, order rotating).

    .venv/bin/python bench/bench_auth.py [--rounds R] [--runs N]
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_pages import upload_runs
from paired import load_average, paired_rounds, ratios, spread
from serve import server_env, start_server

PATHS = ("/api/runs", "/runs")
RATIO_LIMIT = 1.25
REQUESTS_PER_SAMPLE = 9
EMUPLAN = str(Path(sys.executable).with_name("emuplan"))


def median_get_seconds(url: str, headers: dict[str, str]) -> float:
    times = []
    for _ in range(REQUESTS_PER_SAMPLE):
        start = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as response:
            response.read()
            assert response.status == 200, url
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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
            server.terminate()
            server.wait(timeout=30)
        shutil.copy(off_dir / "bench.sqlite3", on_dir / "bench.sqlite3")
        token = make_token(str(on_dir))
        servers = {"off": start_server(str(off_dir)), "on": start_server(str(on_dir), EMUPLAN_AUTH="accounts")}
        headers = {"off": {}, "on": {"Authorization": f"Bearer {token}"}}
        try:
            print(f"sign-in on vs off, {args.runs} runs, {args.rounds} paired rounds, median of "
                  f"{REQUESTS_PER_SAMPLE} GETs each (load {load_average()})")  # fmt: skip
            cases = {
                (path, auth): lambda path=path, auth=auth: median_get_seconds(servers[auth][1] + path, headers[auth])
                for path in PATHS
                for auth in servers
            }
            values = paired_rounds(cases, args.rounds)
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(timeout=30)
    failed = False
    for path in PATHS:
        ratio = ratios(values, (path, "on"), (path, "off"))
        ok = statistics.median(ratio) <= RATIO_LIMIT
        failed |= not ok
        print(f"  {path:<10} off {spread([v * 1e3 for v in values[(path, 'off')]], 1, ' ms')}; "
              f"on {spread([v * 1e3 for v in values[(path, 'on')]], 1, ' ms')}; "
              f"ratio {spread(ratio, 2)}x (target ≤ {RATIO_LIMIT}x) {'ok' if ok else 'MISSED'}")  # fmt: skip
    print(f"  load average after: {load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
