"""Import of a 2,000,000-row per-iteration CSV, end to end, against pyarrow's CSV parser alone.

End to end = HTTP upload (multipart, through the app's size-limit middleware) → parse → checks →
statistics, ECDF grids, delay series → Parquet → one SQLite transaction → 201. Baseline =
``pyarrow.csv.read_csv`` on the same bytes, measured in the same run. Target: ratio ≤ 4.

    .venv/bin/python bench/bench_import.py [--rows N] [--repeat R]
"""

import argparse
import importlib.util
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
from fastapi.testclient import TestClient

from emuplan.main import create_app
from emuplan.settings import Settings
from emuplan.store.db import migrate

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 4.0


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "generate_results", REPO / "tests" / "fixtures" / "generate_results.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated_csv(rows: int) -> bytes:
    sink = io.BytesIO()
    pacsv.write_csv(load_generator().per_iteration_table(rows, seed=0), sink, pacsv.WriteOptions(quoting_style="none"))
    return sink.getvalue()


def milliseconds(times: list[float]) -> str:
    return ", ".join(f"{t * 1e3:.0f}" for t in times)


def seconds(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    data = generated_csv(args.rows)
    print(f"generated per-iteration CSV: {args.rows:,} rows, {len(data) / 1e6:.1f} MB")
    # A distinct trailing row keeps each upload's content hash new, so every upload is a real import.
    bodies = [data + b"%d,2600,all_reduce,18.0,0.0,generated\n" % (10**7 + i) for i in range(args.repeat)]
    baseline_times, end_to_end_times = [], []

    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/bench.sqlite3"
        migrate(url)
        settings = Settings(database_url=url, demo=False, max_upload_bytes=1 << 31)
        with TestClient(create_app(settings), base_url="http://localhost") as client:

            def upload(body: bytes) -> None:
                response = client.post("/api/runs", files={"file": ("bench.csv", body)}, data={"strategy": "pipeline"})
                assert response.status_code == 201, response.text

            upload(b"iteration,size,time_ms\n0,8,1\n")  # warm-up: imports, first connection
            # Interleaved, so that both see the same machine load (other work on a shared box).
            for body in bodies:
                baseline_times.append(seconds(lambda: pacsv.read_csv(pa.py_buffer(data))))
                end_to_end_times.append(seconds(lambda body=body: upload(body)))
    baseline, end_to_end = min(baseline_times), min(end_to_end_times)

    ratio = end_to_end / baseline
    print(f"pyarrow.csv.read_csv alone:    best {baseline * 1e3:.0f} ms  (runs: {milliseconds(baseline_times)})")
    print(
        f"upload → stored → stats ready: best {end_to_end * 1e3:.0f} ms  (runs: {milliseconds(end_to_end_times)}; "
        f"median {statistics.median(end_to_end_times) * 1e3:.0f} ms)"
    )
    verdict = "OK" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(f"ratio: {ratio:.2f} × read_csv (target ≤ {TARGET_RATIO:.0f})  {verdict}")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
