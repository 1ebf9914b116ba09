"""Figures and comparisons over HTTP from `emuplan serve`, from the summaries cached at import.

Targets: CDF and delay figure ≤ 20 ms each (issue 14), figure JSON ≤ 300 KB; comparison of 5 runs
≤ 300 ms, JSON ≤ 1.5 MB (issue 4), for runs of 2,000,000 samples. Baseline measured in the same run: the
same CDF figure computed without the cache (read the samples' Parquet blob, sort, take the grid, build the
figure).

Then a run of 10,000,000 samples against a smaller one (issue 33), each figure asked of both in turn in paired
rounds; target: the same time (≤ 1.2×, the median of the rounds' ratios) and ≤ 20 ms. The CDF and the delay
chart against 20,000 samples: 4 sizes of 5,000 give each size's curves their full 2,000 points, as 10,000,000
do, so the figures are the same size and only the samples could make the large run's slower. The clipped
delay chart against a 2,000,000-sample run: it marks every drawn trial past the axis' end (a size of 500,000
trials and more draws its 500 slowest and most buckets' slowest there), against a handful for 20,000 samples.

Runs are stored with ``services.imports.save_run`` from generated samples (tests/fixtures/generate_results.py,
the rows `bench_import.py` uploads as CSV), not uploaded: the import is `bench_import.py`'s.

    .venv/bin/python bench/bench_figures.py [--rows N] [--repeat R] [--large-rows N] [--rounds R]
"""

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from emuplan.charts import cdf_figure
from emuplan.results.analysis.stats import summarise
from emuplan.results.canonical import ParsedResult, samples_table
from emuplan.results.formats import PER_ITERATION
from emuplan.services import imports as run_imports
from emuplan.store import runs as run_rows
from emuplan.store.db import Database, migrate

sys.path.insert(0, str(Path(__file__).parent))
from bench_import import load_generator  # noqa: E402  (the sibling script)
from paired import interleaved_get_seconds, load_average, paired_rounds, ratio_line, spread  # noqa: E402
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
        samples = run_rows.load_samples(session, run_id)
    return cdf_figure(summarise(samples_table(
        duration_us=samples["duration_us"].to_numpy(), iteration=samples["iteration"].to_numpy(),
        collective=samples["collective"], size_bytes=samples["size_bytes"],
    )))  # fmt: skip


SMALL_ROWS = 20_000
SAME_TIME = 1.2
FIGURE_LIMIT_S = 0.020
# Each figure with the run it is paired against: "small" (SMALL_ROWS) or "comparison" (a --rows run, a data run).
PAIRED_FIGURES = {"cdf?log_x=true": "small", "delay": "small", "delay?clip=true": "comparison"}
REQUESTS_PER_SAMPLE = 15


def stored_run(database: Database, generator, rows: int, seed: int, strategy: str) -> int:
    """A run of ``rows`` generated per-iteration samples (4 sizes, rare multi-second spikes); its id."""
    table = generator.per_iteration_table(rows, seed=seed)
    samples = samples_table(
        duration_us=table["Completion Time (ms)"].to_numpy() * 1e3, iteration=table["Iteration"].to_numpy(),
        collective=table["Collective"][0].as_py(), size_bytes=table["Data Size"].to_numpy(),
        start_us=table["Start Time (ms)"].to_numpy() * 1e3,
    )  # fmt: skip
    with database.writing() as session:
        parsed = ParsedResult(samples=samples, source_format=PER_ITERATION)
        return run_imports.save_run(session, parsed, name=f"generated {rows:,} #{seed}", strategy=strategy).id


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--large-rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    generator = load_generator()
    failures = 0
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/bench.sqlite3"
        migrate(url)
        database = Database(url)
        run_ids = [
            stored_run(database, generator, args.rows, seed, strategy)
            for seed, strategy in enumerate(("pipeline", "data", "tensor", "hybrid", "pipeline"))
        ]
        small_id = stored_run(database, generator, SMALL_ROWS, 5, "data")
        large_id = stored_run(database, generator, args.large_rows, 6, "data")
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
            smaller = {"small": (small_id, SMALL_ROWS), "comparison": (run_ids[1], args.rows)}
            failures += not paired_figures(base, smaller, (large_id, args.large_rows), args.rounds)
        finally:
            stop_server(server)
        baseline = statistics.median(timed(max(1, args.repeat // 2), lambda: uncached_cdf(database, run_ids[0]))[0])
        database.dispose()
    print(f"baseline, CDF without the cache in-process (read samples, sort, grid, figure): {baseline * 1e3:.0f} ms")
    print(f"ratio cached over HTTP / uncached: {cached / baseline:.3f}")
    return 1 if failures else 0


def paired_figures(base: str, smaller: dict[str, tuple[int, int]], large: tuple[int, int], rounds: int) -> bool:
    """Prints each figure's time for its smaller run (``PAIRED_FIGURES``) and the large run, asked in turn; whether
    the large run's kept to ``SAME_TIME`` × the smaller run's and to ``FIGURE_LIMIT_S``."""
    large_id, large_rows = large
    pairs = {kind: (smaller[against], (large_id, large_rows)) for kind, against in PAIRED_FIGURES.items()}
    urls = {kind: [f"{base}/api/runs/{run_id}/figures/{kind}" for run_id, _ in pair] for kind, pair in pairs.items()}
    print(f"figures of a {large_rows:,}-sample run against a smaller run's, {rounds} paired rounds, median of "
          f"{REQUESTS_PER_SAMPLE} GETs of each, in turn (load {load_average()})")  # fmt: skip
    for kind, pair in urls.items():
        sizes = " and ".join(f"{len(get(url)) / 1e3:.0f} KB" for url in pair)  # also the warm-up
        print(f"  {kind:<16} JSON {sizes}")
    cases = {kind: lambda kind=kind: interleaved_get_seconds(urls[kind], REQUESTS_PER_SAMPLE) for kind in urls}
    all_ok = True
    for kind, timings in paired_rounds(cases, rounds).items():
        (_, small_rows), _ = pairs[kind]
        small_s, large_s = (list(times) for times in zip(*timings, strict=True))
        line, ok = ratio_line(f"{kind:<16}", (f"{small_rows:,}", small_s), (f"{large_rows:,}", large_s), SAME_TIME)
        fast = statistics.median(large_s) <= FIGURE_LIMIT_S
        print(line + ("" if fast else f"; over {FIGURE_LIMIT_S * 1e3:.0f} ms"))
        all_ok &= ok and fast
    print(f"  load average after: {load_average()}")
    return all_ok


if __name__ == "__main__":
    sys.exit(main())
