"""Figures and comparisons of 2,000,000-sample runs over HTTP from `emuplan serve`, from the summaries
cached at import.

Targets: CDF and delay figure ≤ 20 ms each (issue 14), figure JSON ≤ 300 KB; comparison of 5 runs
≤ 300 ms, JSON ≤ 1.5 MB (issue 4). Baseline measured in the same run: the same CDF figure computed
without the cache (read the samples' Parquet blob, sort, take the grid, build the figure).

    .venv/bin/python bench/bench_figures.py [--rows N] [--repeat R]
"""

import argparse
import io
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyarrow.csv as pacsv

from emuplan.charts import cdf_figure
from emuplan.results import parse_result_file
from emuplan.results.canonical import samples_table
from emuplan.results.stats import summarise
from emuplan.store import runs as store
from emuplan.store.db import Database, migrate

sys.path.insert(0, str(Path(__file__).parent))
from bench_import import load_generator  # noqa: E402  (the sibling script)
from paired import spread  # noqa: E402
from serve import start_server, stop_server  # noqa: E402

TARGETS = {"cdf": (0.020, 300_000), "delay": (0.020, 300_000), "compare": (0.300, 1_500_000)}


def timed(repeat: int, action) -> tuple[list[float], object]:
    """Each of ``repeat`` runs' seconds, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return times, result


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        assert response.status == 200, url
        return response.read()


def uncached_cdf(database: Database, run_id: int) -> dict:
    with database.read_session() as session:
        samples = store.load_samples(session, run_id)
    return cdf_figure(summarise(samples_table(
        duration_us=samples["duration_us"].to_numpy(), iteration=samples["iteration"].to_numpy(),
        collective=samples["collective"], size_bytes=samples["size_bytes"],
    )))  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    generator = load_generator()
    failures = 0
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/bench.sqlite3"
        migrate(url)
        database = Database(url)
        run_ids = []
        for seed, strategy in enumerate(("pipeline", "data", "tensor", "hybrid", "pipeline")):
            table = generator.per_iteration_table(args.rows, seed=seed)
            parsed = parse_result_file(_csv_bytes(table), f"generated-{seed}.csv")
            with database.writing() as session:
                run_ids.append(store.save_run(session, parsed, name=f"generated {seed}", strategy=strategy).id)
        print(f"5 runs of {args.rows:,} generated samples each (4 data sizes)")
        server, base = start_server(directory)
        try:
            run_list = ",".join(map(str, run_ids))
            measured = {
                "cdf": f"{base}/api/runs/{run_ids[0]}/figures/cdf?log_x=true",
                "delay": f"{base}/api/runs/{run_ids[0]}/figures/delay",
                "compare": f"{base}/api/compare?runs={run_list}",
            }
            for name, url in measured.items():
                get(url)  # warm-up: the first request of a kind imports what it needs
                times, body = timed(args.repeat, lambda url=url: get(url))
                seconds = statistics.median(times)
                limit_s, limit_bytes = TARGETS[name]
                ok = seconds <= limit_s and len(body) <= limit_bytes
                failures += not ok
                print(
                    f"{name:>8}: median {spread([t * 1e3 for t in times], digits=1, unit=' ms')} "
                    f"(target ≤ {limit_s * 1e3:.0f}), JSON {len(body) / 1e3:7.1f} KB (target ≤ {limit_bytes / 1e3:.0f})"
                    f"  {'OK' if ok else 'OVER TARGET'}"
                )
            cached = statistics.median(timed(args.repeat, lambda: get(measured["cdf"]))[0])
        finally:
            stop_server(server)
        baseline = statistics.median(timed(max(1, args.repeat // 2), lambda: uncached_cdf(database, run_ids[0]))[0])
        database.dispose()
    print(f"baseline, CDF without the cache in-process (read samples, sort, grid, figure): {baseline * 1e3:.0f} ms")
    print(f"ratio cached over HTTP / uncached: {cached / baseline:.3f}")
    return 1 if failures else 0


def _csv_bytes(table) -> bytes:
    sink = io.BytesIO()
    pacsv.write_csv(table, sink)
    return sink.getvalue()


if __name__ == "__main__":
    sys.exit(main())
