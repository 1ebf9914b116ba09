"""Figures and comparisons of 2,000,000-sample runs, through the API, from the summaries cached at import.

Targets (issue 4): CDF and delay figure ≤ 50 ms each, figure JSON ≤ 300 KB; comparison of 5 runs
≤ 300 ms, JSON ≤ 1.5 MB. Baseline measured in the same run: the same CDF figure computed without the
cache (read the samples' Parquet blob, sort, take the grid, build the figure).

    .venv/bin/python bench/bench_figures.py [--rows N] [--repeat R]
"""

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.csv as pacsv
from fastapi.testclient import TestClient

from emuplan.charts import cdf_figure
from emuplan.main import create_app
from emuplan.results import parse_result_file
from emuplan.results.canonical import samples_table
from emuplan.results.stats import summarise
from emuplan.settings import Settings
from emuplan.store import runs as store
from emuplan.store.db import Database, migrate

sys.path.insert(0, str(Path(__file__).parent))
from bench_import import load_generator  # noqa: E402  (the sibling script)

TARGETS = {"cdf": (0.050, 300_000), "delay": (0.050, 300_000), "compare": (0.300, 1_500_000)}


def timed(repeat: int, action) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


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
        with TestClient(create_app(Settings(database_url=url, demo=False)), base_url="http://localhost") as client:
            measured = {
                "cdf": lambda: client.get(f"/api/runs/{run_ids[0]}/figures/cdf", params={"log_x": "true"}),
                "delay": lambda: client.get(f"/api/runs/{run_ids[0]}/figures/delay"),
                "compare": lambda: client.get("/api/compare", params={"runs": ",".join(map(str, run_ids))}),
            }
            for name, action in measured.items():
                action()  # warm-up: imports, plotly validators
                seconds, response = timed(args.repeat, action)
                assert response.status_code == 200, response.text
                limit_s, limit_bytes = TARGETS[name]
                ok = seconds <= limit_s and len(response.content) <= limit_bytes
                failures += not ok
                print(
                    f"{name:>8}: median {seconds * 1e3:6.1f} ms (target ≤ {limit_s * 1e3:.0f}), "
                    f"JSON {len(response.content) / 1e3:7.1f} KB (target ≤ {limit_bytes / 1e3:.0f})  "
                    f"{'OK' if ok else 'OVER TARGET'}"
                )
            cached, _ = timed(args.repeat, measured["cdf"])
        baseline, _ = timed(max(1, args.repeat // 2), lambda: uncached_cdf(database, run_ids[0]))
        database.dispose()
    print(f"baseline, CDF without the cache (read samples, sort, grid, figure): {baseline * 1e3:.0f} ms")
    print(f"ratio cached / uncached: {cached / baseline:.3f}")
    return 1 if failures else 0


def _csv_bytes(table) -> bytes:
    sink = io.BytesIO()
    pacsv.write_csv(table, sink)
    return sink.getvalue()


if __name__ == "__main__":
    sys.exit(main())
