"""nccl-tests ``-J FILE`` reports (shape written by ``src/util.cu``, ``"version": 2``): ``results`` is a list of
``{size, count, type, redop, root, out_of_place: {time|cpu_time, alg_bw, bus_bw, nwrong}, in_place: {...}}``;
with per-iteration timing (``-I 1``) each variant also has ``<variant>_per_iter`` with ``times_us`` — one sample
per iteration — and, with more than one MPI process, ``per_process_max_times_us``: per process, its time for
each iteration (the max over its GPUs; ``times_us`` is the max over processes), kept as the run's per-rank
times. ``devices`` lists ranks and host names, ``args[0]`` is the binary. Which collective the report holds:
``results.formats.nccl_tests_shared``.
"""

import json

import numpy as np
import pyarrow as pa

from emuplan import json_input
from emuplan.results.budget import JSON_BYTES_PER_BYTE
from emuplan.results.canonical import (
    INT64_LIMIT,
    LONGEST_TIME_US,
    ParsedResult,
    ResultFileError,
    rank_times_table,
    samples_table,
    times_problem,
)
from emuplan.results.formats import NCCL_TESTS_JSON, nccl_tests_shared
from emuplan.results.formats.upload import Upload


def recognises(upload: Upload) -> bool:
    return upload.text_head.lstrip().startswith("{")


def parse(upload: Upload) -> ParsedResult:
    # The objects the JSON becomes.
    upload.budget.holds(upload.size * JSON_BYTES_PER_BYTE, upload.file_name)
    file_name, collective = upload.file_name, upload.collective
    document = _load_json(bytes(upload.content()), file_name)
    results = document.get("results")
    if not isinstance(results, list):
        raise ResultFileError(f"{file_name}: JSON without a 'results' list is not an nccl-tests -J report")
    args = document.get("args") or []
    named = nccl_tests_shared.collective_from_text(" ".join(str(a) for a in args[:1]))
    cells = _json_cells(results)
    fitting = nccl_tests_shared.collectives_fitting_cells(cells) if cells is not None else None
    op, warnings = nccl_tests_shared.choose_collective(file_name, named, fitting, collective, file_name)
    if op is None:
        op = "unknown"
        warnings = warnings or [
            f"{file_name}: the collective is not in the report (no '<op>_perf' in args[0], no redop/root cells "
            "that decide it); pass it explicitly"
        ]
    devices = document.get("config", {}).get("devices") or document.get("devices") or []
    rank_hosts = {
        d["rank"]: str(d.get("hostname", ""))
        for d in devices
        if isinstance(d, dict) and isinstance(d.get("rank"), int) and not isinstance(d["rank"], bool)
    }
    ranks, hosts = nccl_tests_shared.ranks_and_hosts(rank_hosts)
    per_process = _PerProcessTimes(file_name, rank_hosts)

    sizes: list[np.ndarray] = []
    variants: list[str] = []
    iterations: list[np.ndarray] = []
    times: list[np.ndarray] = []
    algbws: list[np.ndarray] = []
    busbws: list[np.ndarray] = []
    averaged_only = False
    elements: dict[tuple[str, int], tuple[int, str]] = {}
    wrong: dict[tuple[str, int, str], int] = {}
    for index, result in enumerate(results):
        where = f"{file_name}: results[{index}]"
        if not isinstance(result, dict) or "size" not in result:
            raise ResultFileError(f"{where}: expected an object with 'size'")
        size = _json_int(result["size"], f"{where}.size")
        if isinstance(result.get("count"), int) and not isinstance(result["count"], bool):
            elements[(op, size)] = (result["count"], str(result.get("type", "")))
        for key, variant in (("out_of_place", "out-of-place"), ("in_place", "in-place")):
            summary = result.get(key)
            if not isinstance(summary, dict):
                continue
            # util.cu prints nwrong with %lf: 0.000000
            nwrong = summary.get("nwrong")
            if isinstance(nwrong, int | float) and not isinstance(nwrong, bool) and 0 <= nwrong < INT64_LIMIT:
                wrong[(op, size, variant)] = int(nwrong)
            per_iter = result.get(f"{key}_per_iter")
            if isinstance(per_iter, dict) and isinstance(per_iter.get("times_us"), list):
                values = _json_times(per_iter["times_us"], f"{where}.{key}_per_iter.times_us")
                first_sample = sum(len(part) for part in times)
                per_process.add(per_iter, f"{where}.{key}_per_iter", first_sample, len(values))
            else:
                averaged_only = True
                values = _json_times([summary.get("time", summary.get("cpu_time"))], f"{where}.{key}.time")
            sizes.append(np.full(len(values), size, dtype=np.int64))
            variants.extend([variant] * len(values))
            iterations.append(np.arange(len(values), dtype=np.int64))
            times.append(values)
            # Bandwidths in the report belong to the mean; per-iteration rows get them recomputed by stats.
            reported = len(values) == 1
            algbws.append(np.full(len(values), _json_float(summary.get("alg_bw")) if reported else np.nan))
            busbws.append(np.full(len(values), _json_float(summary.get("bus_bw")) if reported else np.nan))
    if not times:
        raise ResultFileError(f"{file_name}: the nccl-tests report has no results")
    if averaged_only:
        warnings.append(
            f"{file_name}: some sizes have no per-iteration times (run with -I 1): their mean time is one sample"
        )
    rank_times, rank_unit = per_process.table(warnings)
    # The report's own "Avg bus bandwidth" (the stdout footer's figure), shown beside ours.
    average = (document.get("average_bus_bandwidth") or {}).get("bandwidth")
    reported_avg_busbw = (
        {op: float(average)} if isinstance(average, int | float) and not isinstance(average, bool) else {}
    )
    return ParsedResult(
        samples=samples_table(
            duration_us=np.concatenate(times),
            iteration=np.concatenate(iterations),
            collective=op,
            size_bytes=np.concatenate(sizes),
            variant=pa.array(variants),
            algbw_gbps=nccl_tests_shared.nan_to_null(np.concatenate(algbws).tolist()),
            busbw_gbps=nccl_tests_shared.nan_to_null(np.concatenate(busbws).tolist()),
        ),
        source_format=NCCL_TESTS_JSON,
        ranks=ranks,
        hosts=hosts,
        warnings=warnings,
        reported_avg_busbw=reported_avg_busbw,
        elements=elements,
        wrong=wrong,
        rank_times=rank_times,
        rank_unit=rank_unit,
        rank_basis="its own time for the iteration, as nccl-tests measured it (per_process_max_times_us; with "
        "several GPUs in a process, the slowest of them)",
    )


def _json_cells(results: list) -> nccl_tests_shared.Cells | None:
    """The cells of the report's largest size (``writeBenchmarkLinePreamble`` writes redop and root as text)."""
    sized = [r for r in results if isinstance(r, dict) and isinstance(r.get("size"), int) and r["size"] > 0]
    if not sized:
        return None
    result = max(sized, key=lambda r: r["size"])
    out_of_place = result.get("out_of_place") if isinstance(result.get("out_of_place"), dict) else {}
    count = result.get("count")
    return nccl_tests_shared.Cells(
        redop=str(result["redop"]).strip() if "redop" in result else None,
        root=str(result["root"]).strip() if "root" in result else None,
        size=result["size"],
        count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        type_name=str(result.get("type", "")),
        algbw=_json_float(out_of_place.get("alg_bw")),
        busbw=_json_float(out_of_place.get("bus_bw")),
    )


class _PerProcessTimes:
    """``per_process_max_times_us`` of every (size, variant), gathered into one per-rank times table.

    nccl-tests numbers ranks process by process (rank = process × GPUs per process + GPU), so process p's
    host is that of rank p × (ranks ÷ processes) in ``devices``."""

    def __init__(self, file_name: str, rank_hosts: dict[int, str]) -> None:
        self.file_name, self.rank_hosts = file_name, rank_hosts
        self.processes: int | None = None
        self.parts: list[tuple[int, np.ndarray]] = []  # (first sample, times shaped (processes, iterations))

    def add(self, per_iter: dict, where: str, first_sample: int, iterations: int) -> None:
        rows = per_iter.get("per_process_max_times_us")
        if rows is None:
            return
        where = f"{where}.per_process_max_times_us"
        if not isinstance(rows, list) or not rows or not all(isinstance(row, list) for row in rows):
            raise ResultFileError(f"{where}: expected a list with one list of times per process")
        if self.processes is not None and len(rows) != self.processes:
            raise ResultFileError(f"{where}: {len(rows)} processes here, {self.processes} in the results before")
        self.processes = len(rows)
        for process, row in enumerate(rows):
            if len(row) != iterations:
                raise ResultFileError(
                    f"{where}[{process}]: {len(row)} times where times_us has {iterations} iterations"
                )
        times = np.stack([_json_times(row, f"{where}[{process}]") for process, row in enumerate(rows)])
        self.parts.append((first_sample, times))

    def table(self, warnings: list[str]) -> tuple[pa.Table | None, str]:
        if not self.parts:
            return None, "rank"
        processes = self.processes
        per_process = len(self.rank_hosts) // processes if len(self.rank_hosts) % processes == 0 else 0
        if per_process:
            hosts = [self.rank_hosts.get(process * per_process, "") for process in range(processes)]
        else:
            hosts = [""] * processes
            warnings.append(
                f"{self.file_name}: {len(self.rank_hosts)} devices do not divide into {processes} processes: "
                "the per-process times have no host"
            )
        durations, samples, process_of_row = [], [], []
        for first_sample, times in self.parts:
            count = times.shape[1]
            durations.append(times.ravel())
            samples.append(np.tile(np.arange(first_sample, first_sample + count, dtype=np.int64), processes))
            process_of_row.append(np.repeat(np.arange(processes, dtype=np.int32), count))
        process_codes = pa.array(np.concatenate(process_of_row))
        host_names = list(dict.fromkeys(hosts))
        host_codes = np.array([host_names.index(host) for host in hosts], dtype=np.int32)
        table = rank_times_table(
            duration_us=np.concatenate(durations),
            sample=np.concatenate(samples),
            rank=pa.DictionaryArray.from_arrays(process_codes, pa.array([str(p) for p in range(processes)])),
            host=pa.DictionaryArray.from_arrays(pa.array(host_codes[process_codes.to_numpy()]), pa.array(host_names)),
        )
        return table, "rank" if per_process == 1 else "process"


def _json_float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _json_int(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < INT64_LIMIT:
        raise ResultFileError(f"{where}: {value!r} is not a byte count below 2^63")
    if int(value) != value:
        raise ResultFileError(f"{where}: {value!r} is not a byte count")
    return int(value)


def _json_times(values: list, where: str) -> np.ndarray:
    for position, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | float) or abs(value) > LONGEST_TIME_US:
            raise ResultFileError(f"{where}[{position}]: {value!r} is not a valid time in µs")
    times = np.array(values, dtype=np.float64)
    problem = times_problem(times)
    if problem is not None:
        position, what = problem
        raise ResultFileError(f"{where}[{position}]: {values[position]!r} is not a valid time in µs: {what}")
    return times


def _load_json(data: bytes, file_name: str) -> dict:
    try:
        document = json_input.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultFileError(f"{file_name}: not valid JSON ({error})") from error
    if not isinstance(document, dict):
        raise ResultFileError(f"{file_name}: expected a JSON object (an nccl-tests -J report)")
    return document
