"""The audit's sign-in flood against `emuplan serve` (EMUPLAN_AUTH=accounts, SQLite): many clients on one
machine failing sign-in as fast as they are answered, while the owner signs in from another address every
2 s and reads a page with the session.

Target: no answer is a 5xx, every sign-in of the owner succeeds. Prints the answers by status and the
owner's sign-in and read times.

    .venv/bin/python bench/bench_sign_in_flood.py [--clients 40] [--seconds 20]
"""

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx2

from paired import load_average
from serve import server_env, start_server, stop_server

EMUPLAN = str(Path(sys.executable).with_name("emuplan"))
FLOOD_ADDRESS = "127.0.0.2"  # every flooding client on one machine; the owner comes from 127.0.0.1
OWNER_EVERY_S = 2.0


def add_owner(directory: str) -> str:
    env = server_env(directory, EMUPLAN_AUTH="accounts")
    added = subprocess.run(
        [EMUPLAN, "users", "add", "ada", "--role", "admin"], env=env, check=True, capture_output=True, text=True
    )
    return re.search(r"shown once: (\S+)", added.stdout).group(1)


def flood(base: str, stop: threading.Event, statuses: Counter, lock: threading.Lock) -> None:
    transport = httpx2.HTTPTransport(local_address=FLOOD_ADDRESS)
    with httpx2.Client(base_url=base, transport=transport, timeout=120) as client:
        attempt = 0
        while not stop.is_set():
            attempt += 1
            try:
                status = client.post("/sign-in", data={"name": "ada", "password": f"guess-{attempt}"}).status_code
            except httpx2.HTTPError as error:
                status = type(error).__name__
            with lock:
                statuses[status] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=20.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        password = add_owner(directory)
        server, base = start_server(directory, EMUPLAN_AUTH="accounts")
        try:
            statuses: Counter = Counter()
            lock = threading.Lock()
            stop = threading.Event()
            threads = [
                threading.Thread(target=flood, args=(base, stop, statuses, lock)) for _ in range(options.clients)
            ]
            for thread in threads:
                thread.start()
            end = time.monotonic() + options.seconds
            sign_ins, reads, refused = [], [], []
            while time.monotonic() + OWNER_EVERY_S < end:
                time.sleep(OWNER_EVERY_S)
                with httpx2.Client(base_url=base, timeout=120) as owner:
                    started = time.monotonic()
                    response = owner.post("/sign-in", data={"name": "ada", "password": password})
                    sign_ins.append(time.monotonic() - started)
                    if response.status_code != 303:
                        refused.append(response.status_code)
                        continue
                    started = time.monotonic()
                    owner.get("/api/account").raise_for_status()
                    reads.append(time.monotonic() - started)
            stop.set()
            for thread in threads:
                thread.join()
        finally:
            stop_server(server)
    server_errors = sum(count for status, count in statuses.items() if not isinstance(status, int) or status >= 500)
    print(f"load average {load_average()}; {options.clients} clients × {options.seconds:g} s from one address")
    answers = dict(sorted(statuses.items(), key=str))
    print(f"flood answers: {sum(statuses.values())} {answers}; 5xx or errors: {server_errors}")
    for what, times in (("owner's sign-in", sign_ins), ("then GET /api/account", reads)):
        if times:
            print(
                f"{what}: {len(times)}×, median {statistics.median(times):.2f} s, "
                f"min {min(times):.2f} s, max {max(times):.2f} s"
            )
    print(f"owner refused: {refused or 'never'}")
    sys.exit(1 if server_errors or refused else 0)


if __name__ == "__main__":
    main()
