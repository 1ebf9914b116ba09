"""Chart pages in headless Chromium against `emuplan serve`: bytes over the wire and time to drawn charts.

Targets: a chart page's first visit transfers ≤ 1.6 MB (Plotly travels gzipped), the next visit
~0 beyond the page and its figures (static files are immutable under versioned URLs); the run page
and a 5-run compare draw their charts in ≤ 1.5× the time a blank page takes to load only Plotly,
measured in the same rounds (fresh browser context each, so nothing is cached).

    .venv/bin/python bench/bench_pages.py [--rows N] [--rounds R]
"""

import argparse
import io
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyarrow.csv as pacsv
from playwright.sync_api import Browser, sync_playwright

from bench_import import load_generator
from paired import load_average, paired_rounds, ratios, spread

CHROMIUM = "/usr/bin/chromium"
FIRST_VISIT_LIMIT = 1_600_000
DRAW_RATIO_LIMIT = 1.5
# run.js and compare.js mark the body once every chart is drawn.
ALL_CHARTS_DRAWN = "body[data-charts-drawn='true']"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_env(directory: str, **settings: str) -> dict[str, str]:
    """The environment of `emuplan serve` (and of CLI commands) on ``directory``'s database."""
    database = {"EMUPLAN_DATABASE_URL": f"sqlite:///{directory}/bench.sqlite3", "EMUPLAN_DEMO": "false"}
    return {**os.environ, **database, **settings}


def start_server(directory: str, **settings: str) -> tuple[subprocess.Popen, str]:
    """`emuplan serve` on ``directory``'s database; ``settings`` are further EMUPLAN_* variables."""
    port = free_port()
    env = server_env(directory, **settings)
    emuplan = str(Path(sys.executable).with_name("emuplan"))
    server = subprocess.Popen(
        [emuplan, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(f"{base}/api/health", timeout=1)
            return server, base
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("emuplan serve did not answer within 60 s")


def upload_runs(base: str, rows: int, count: int) -> list[int]:
    """``count`` per-iteration runs over HTTP, each from a different seed."""
    generator = load_generator()
    run_ids = []
    for seed in range(count):
        sink = io.BytesIO()
        pacsv.write_csv(generator.per_iteration_table(rows, seed=seed), sink, pacsv.WriteOptions(quoting_style="none"))
        boundary = "benchpagesboundary"
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="run{seed}.csv"\r\n'
            f"Content-Type: text/csv\r\n\r\n".encode()
            + sink.getvalue()
            + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="strategy"\r\n\r\npipeline\r\n'
            f"--{boundary}--\r\n".encode()
        )
        request = urllib.request.Request(
            f"{base}/api/runs", data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            run_ids.append(json.loads(response.read())["id"])
    return run_ids


class Visit:
    """Fresh browser context; counts the bytes Chromium receives (encoded, as they crossed the wire)."""

    def __init__(self, browser: Browser):
        self.context = browser.new_context(viewport={"width": 1280, "height": 800})
        self.page = self.context.new_page()
        self.bytes = 0
        session = self.context.new_cdp_session(self.page)
        session.send("Network.enable")
        session.on("Network.loadingFinished", self._finished)

    def _finished(self, event: dict) -> None:
        self.bytes += event["encodedDataLength"]

    def open(self, url: str, wait_for: str | None) -> float:
        """Seconds from navigation until ``wait_for`` matches (or the load event)."""
        self.bytes = 0
        start = time.perf_counter()
        self.page.goto(url, wait_until="load")
        if wait_for:
            self.page.wait_for_selector(wait_for, state="attached", timeout=120_000)
        return time.perf_counter() - start

    def close(self) -> None:
        self.context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as directory:
        server, base = start_server(directory)
        try:
            run_ids = upload_runs(base, args.rows, 5)
            pages = {
                "run page": (f"{base}/runs/{run_ids[0]}", ALL_CHARTS_DRAWN),
                "5-run compare": (f"{base}/compare?runs={','.join(map(str, run_ids))}", ALL_CHARTS_DRAWN),
            }
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                run_html = urllib.request.urlopen(pages["run page"][0]).read().decode()
                plotly_url = base + re.search(r'src="(/static/[^"]+/plotly\.min\.js)"', run_html).group(1)
                blank_html = f'<!doctype html><title>blank</title><script src="{plotly_url}"></script>'
                transfer: dict[str, tuple[list[int], list[int]]] = {name: ([], []) for name in pages}

                def blank() -> float:
                    visit = Visit(browser)
                    visit.page.route(
                        f"{base}/bench-blank", lambda route: route.fulfill(body=blank_html, content_type="text/html")
                    )
                    seconds = visit.open(f"{base}/bench-blank", None)  # Plotly's script blocks the load event
                    visit.close()
                    return seconds

                def chart_page(name: str) -> float:
                    url, wait_for = pages[name]
                    visit = Visit(browser)
                    seconds = visit.open(url, wait_for)
                    first = visit.bytes
                    visit.open(url, wait_for)
                    transfer[name][0].append(first)
                    transfer[name][1].append(visit.bytes)
                    visit.close()
                    return seconds

                cases = {"blank page loading only Plotly": blank} | {
                    name: lambda name=name: chart_page(name) for name in pages
                }
                print(f"chart pages, {args.rounds} paired rounds, {args.rows:,}-row runs (load {load_average()})")
                values = paired_rounds(cases, args.rounds)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"  blank page loading only Plotly   {spread(values['blank page loading only Plotly'], unit=' s')}")
    for name in pages:
        ratio = ratios(values, name, "blank page loading only Plotly")
        first, second = transfer[name]
        ok_draw = statistics.median(ratio) <= DRAW_RATIO_LIMIT
        ok_bytes = statistics.median(first) <= FIRST_VISIT_LIMIT
        failed |= not (ok_draw and ok_bytes)
        draw_verdict = "ok" if ok_draw else "MISSED"
        print(f"  {name:<32} charts drawn {spread(values[name], unit=' s')}; "
              f"ratio to blank {spread(ratio, digits=2)}x (target ≤ {DRAW_RATIO_LIMIT}x) {draw_verdict}")  # fmt: skip
        print(f"  {'':<32} transfer first visit {spread([b / 1e6 for b in first], unit=' MB')} "
              f"(target ≤ {FIRST_VISIT_LIMIT / 1e6} MB) {'ok' if ok_bytes else 'MISSED'}; "
              f"next visit {spread([b / 1e3 for b in second], digits=1, unit=' kB')}")  # fmt: skip
    print(f"  load average after: {load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
