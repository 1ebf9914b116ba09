"""nccl-tests / rccl-tests output: the stdout table and the ``-J`` JSON report.

stdout: a ``#`` preamble (``# Collective test starting: all_reduce_perf``, ``#  Rank  3 Group 0 Pid … on
HOST device …``), a header row read by name — current nccl-tests print ``size count type redop root``
then ``time algbw busbw #wrong`` for out-of-place and again for in-place; before NCCL 2.13 there is no
``root`` (except for rooted ops) and ``error`` replaces ``#wrong``, and all_gather has no ``redop`` —
and one data row per size. Every (size, variant) becomes one sample whose duration is the mean over the
benchmark's ``iters``.

JSON (nccl-tests ``-J FILE``, shape written by ``src/util.cu``, ``"version": 2``): ``results`` is a list
of ``{size, count, type, redop, root, out_of_place: {time|cpu_time, alg_bw, bus_bw, nwrong},
in_place: {...}}``; with per-iteration timing (``-I 1``) each variant also has ``<variant>_per_iter``
with ``times_us`` — one sample per iteration — and, with more than one MPI process,
``per_process_max_times_us``: per process, its time for each iteration (the max over its GPUs; ``times_us``
is the max over processes), kept as the run's per-rank times. ``devices`` lists ranks and host names,
``args[0]`` is the binary.

Which collective a test ran comes from the file's content first: the ``<op>_perf`` binary its preamble or
command line names (``args[0]`` in JSON), else what its ``redop``/``root`` cells and the ratio of ``size`` to
``count`` × the type's bytes allow (``collectives_fitting_cells``). Then the caller's explicit choice — refused
when the content says otherwise — then the file name, else ``unknown``.
"""

import json
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from emuplan import json_input
from emuplan.results.canonical import (
    INT64_LIMIT,
    LONGEST_TIME_US,
    NCCL_TESTS,
    NCCL_TESTS_JSON,
    ParsedResult,
    ResultFileError,
    collective_from_file_name,
    rank_times_table,
    samples_table,
    times_problem,
)
from emuplan.workload.collectives import CollectiveOp, normalise_op_name

_AVG_LINE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_RANK_LINE = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)")
_TEST_NAME = re.compile(r"\b([a-z_]+_perf)(?:_mpi)?\b")
_TIME_TOKENS = ("time", "cputime")
_VARIANT_NAMES = ("out-of-place", "in-place")


def looks_like_nccl_tests(text: str) -> bool:
    return bool(_header_indices(text.splitlines()))


def _header_indices(lines: list[str]) -> list[int]:
    """Every header row: a log may hold several tests run one after the other (all_reduce_perf, then …)."""
    found = []
    for index, line in enumerate(lines):
        if line.startswith("#"):
            tokens = line.lstrip("#").split()
            if tokens[:2] == ["size", "count"] and "busbw" in tokens and any(t in _TIME_TOKENS for t in tokens):
                found.append(index)
    return found


def collective_from_text(text: str) -> str | None:
    """The op of a ``<op>_perf`` binary named anywhere in the text (preamble, command line)."""
    for match in _TEST_NAME.finditer(text):
        op = normalise_op_name(match.group(1))
        if op is not None:
            return op.value
    return None


# Bytes per element of the ``type`` names nccl-tests and rccl-tests print.
_TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
               "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}  # fmt: skip

# What each test passes to nccl-tests' TimeTest (src/<test>.cu): a reduction op name or "none" as the redop
# cell, a root ≥ 0 or -1, and as ``count`` either the whole buffer's elements (size = count × type bytes) or
# one rank's piece (size = n × that). sendrecv prints the op it was given (sum by default) in some versions
# and "none" in others; gather, scatter and hypercube are not collectives emuplan models.
# Keyed by (a reduction in the redop cell, a root ≥ 0, count is the whole buffer).
_CELL_SIGNATURES: dict[tuple[bool, bool, bool], tuple[CollectiveOp, ...]] = {
    (True, False, True): (CollectiveOp.ALL_REDUCE, CollectiveOp.SEND_RECV),
    (True, False, False): (CollectiveOp.REDUCE_SCATTER,),
    (True, True, True): (CollectiveOp.REDUCE,),
    (True, True, False): (),
    (False, False, True): (CollectiveOp.SEND_RECV,),
    (False, False, False): (CollectiveOp.ALL_GATHER, CollectiveOp.ALL_TO_ALL),
    (False, True, True): (CollectiveOp.BROADCAST,),
    (False, True, False): (),
}
# busbw ÷ algbw: all-reduce 2(n−1)/n ≥ 1, the split ops (n−1)/n < 1, the others exactly 1. The cells carry
# two decimals, so from 1 GB/s of algbw on the factor is known to ±0.02.
_FACTOR_TOLERANCE = 0.02


@dataclass(frozen=True)
class Cells:
    """What one row of a test says of its collective: the ``redop`` and ``root`` cells (None when the header
    has no such column, as before NCCL 2.13), ``size``, ``count`` and ``type``, and the bandwidths."""

    redop: str | None
    root: str | None
    size: int
    count: int | None
    type_name: str
    algbw: float
    busbw: float


def collectives_fitting_cells(cells: Cells) -> tuple[str, ...]:
    """The collectives whose nccl-tests output has these cells (empty: none emuplan models)."""
    reduces = cells.redop not in (None, "", "none")
    try:
        rooted = cells.root is not None and int(cells.root) >= 0
    except ValueError:
        rooted = False
    element_bytes = _TYPE_BYTES.get(cells.type_name.lower())
    whole = (
        [cells.size == cells.count * element_bytes]
        if element_bytes and cells.count and cells.size
        else [True, False]  # the type or count is unknown: both kinds
    )
    fitting = [op for kind in whole for op in _CELL_SIGNATURES[(reduces, rooted, kind)]]
    if cells.redop is None and cells.root is None and fitting == [CollectiveOp.ALL_GATHER, CollectiveOp.ALL_TO_ALL]:
        # Before NCCL 2.13 only all_gather printed neither column (alltoall kept a blank redop column).
        fitting = [CollectiveOp.ALL_GATHER]
    if np.isfinite(cells.algbw) and np.isfinite(cells.busbw) and cells.algbw >= 1.0:
        factor = cells.busbw / cells.algbw
        fitting = [op for op in fitting if _factor_fits(op, factor)]
    return tuple(op.value for op in fitting)


def _factor_fits(op: CollectiveOp, factor: float) -> bool:
    if op is CollectiveOp.ALL_REDUCE:
        return factor > 1 - _FACTOR_TOLERANCE
    if op in (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_TO_ALL):
        return factor < 1 + _FACTOR_TOLERANCE
    return abs(factor - 1) <= _FACTOR_TOLERANCE


def choose_collective(
    where: str, named: str | None, fitting: tuple[str, ...] | None, explicit: str | None, file_name: str | None
) -> tuple[str | None, list[str]]:
    """(the collective, warnings) of one test, in this order: the binary the content names, the one collective
    its cells fit, the explicit choice, the file name (when it names one of the collectives the cells fit).

    An explicit choice the content contradicts is refused (``ResultFileError``) rather than stored: it would
    give every busbw and ideal time the wrong factor. A run stored with the content's choice can still be
    relabelled (``store.runs.relabel_collectives``). None when nothing decides."""
    known = normalise_op_name(explicit) if explicit else None
    chosen = known.value if known is not None else explicit
    by_name = collective_from_file_name(file_name) if file_name else None
    if named is not None:
        evidence = f"the file itself names the {named} test (its '<op>_perf' binary)"
        content = (named,)
    elif fitting:
        evidence = f"its redop/root/count cells fit only {' or '.join(fitting)}"
        content = fitting
    else:
        return chosen or by_name, []
    if chosen is not None and chosen not in content:
        raise ResultFileError(
            f"{where}: collective {chosen!r} was given, but {evidence}; leave the collective out (a run can be "
            "relabelled after import)"
        )
    if len(content) == 1:
        op = content[0]
        if by_name is None or by_name == op:
            return op, []
        return op, [f"{where}: the file name says {by_name}, but {evidence}: {op} is used"]
    if chosen is not None:
        return chosen, []
    if by_name in content:
        return by_name, []
    return None, [f"{where}: {evidence}; pass the collective explicitly"]


def _ranks_and_hosts(rank_hosts: dict[int, str]) -> tuple[int | None, int | None]:
    if not rank_hosts:
        return None, None
    return len(rank_hosts), len(set(rank_hosts.values()))


class _Rows:
    """Samples collected from the data rows of one or more test sections."""

    def __init__(self) -> None:
        self.collectives: list[str] = []
        self.sizes: list[int] = []
        self.variants: list[str] = []
        self.times: list[float] = []
        self.algbws: list[float] = []
        self.busbws: list[float] = []
        self.wrong_lines: list[int] = []
        self.elements: dict[tuple[str, int], tuple[int, str]] = {}
        self.wrong: dict[tuple[str, int, str], int] = {}
        self.reported_avg_busbw: dict[str, float] = {}
        # The cells as the log printed them, per (collective, size, variant); None where the log times a
        # size more than once (-N): no single printed cell stands for the group.
        self.printed: dict[tuple[str, int, str], dict[str, str] | None] = {}


def _section_op(
    preamble: str,
    header: list[str],
    data_rows: list[tuple[int, list[str]]],
    where: str,
    file_name: str | None,
    collective: str | None,
) -> tuple[str, list[str]]:
    """The collective of one test section and what to warn of: ``choose_collective`` on the ``<op>_perf`` its
    preamble names and the cells of its largest size. ``file_name`` only for a log with one test."""
    cells = _section_cells(header, data_rows)
    fitting = collectives_fitting_cells(cells) if cells is not None else None
    op, warnings = choose_collective(where, collective_from_text(preamble), fitting, collective, file_name)
    if op is None:
        op = "unknown"
        warnings = warnings or [f"{where}: the test's collective is not in the log (no '<op>_perf' line, no "
                                "redop/root cells that decide it); pass it explicitly"]  # fmt: skip
    return op, warnings


def _section_cells(header: list[str], data_rows: list[tuple[int, list[str]]]) -> Cells | None:
    """The cells of the section's row with the largest size (the one the busbw/algbw factor is least rounded
    in), read by the header's names; None without a complete row."""
    time_index = next(i for i, token in enumerate(header) if token in _TIME_TOKENS)
    complete = [tokens for _, tokens in data_rows if len(tokens) > time_index + 2]
    if not complete:
        return None
    tokens = max(complete, key=lambda row: int(row[0]))
    fields = dict(zip(header, tokens, strict=False))
    return Cells(
        redop=fields.get("redop") if "redop" in header[:time_index] else None,
        root=fields.get("root") if "root" in header[:time_index] else None,
        size=int(tokens[0]),
        count=int(tokens[1]) if tokens[1].isdigit() else None,
        type_name=tokens[2] if time_index > 2 else "",
        algbw=_float_or_nan(fields.get("algbw")),
        busbw=_float_or_nan(fields.get("busbw")),
    )


def _data_rows(header: list[str], numbered_lines: list[tuple[int, str]]) -> list[tuple[int, list[str]]]:
    """(line number, cells) of a section's data rows: NCCL_DEBUG lines ('host:pid:tid [0] NCCL INFO …') and
    other noise do not start with a number. alltoall before NCCL 2.13 leaves its redop cell blank: an empty
    cell is put back in its place."""
    time_index = next(i for i, token in enumerate(header) if token in _TIME_TOKENS)
    redop = header.index("redop") if "redop" in header[:time_index] else None
    short = _row_width(header) - 1
    rows = [(n, line.split()) for n, line in numbered_lines if line.strip() and line.split()[0].isdigit()]
    for _, tokens in rows:
        if redop is not None and len(tokens) == short and _is_number(tokens[redop]):
            tokens.insert(redop, "")
    return rows


def _row_width(header: list[str]) -> int:
    """The cells of a complete row: the key columns and every variant's group of columns."""
    group_starts = [i for i, token in enumerate(header) if token in _TIME_TOKENS]
    group_width = group_starts[1] - group_starts[0] if len(group_starts) > 1 else len(header) - group_starts[0]
    needed = group_starts[0] + group_width * len(group_starts)
    if header[-1] == "timestamp":  # -T 1 appends a 'YYYY-MM-DD HH:MM:SS' stamp: two more tokens per row
        needed -= 1
    return needed


def _read_section(
    rows: _Rows, op: str, header: list[str], data_rows: list[tuple[int, list[str]]], file_name: str, last: bool
) -> str | None:
    """Add a section's complete rows; returns a warning when its last row is cut off (a truncated log)."""
    group_starts = [i for i, token in enumerate(header) if token in _TIME_TOKENS]
    group_width = group_starts[1] - group_starts[0] if len(group_starts) > 1 else len(header) - group_starts[0]
    needed = _row_width(header)
    for position, (line_number, tokens) in enumerate(data_rows):
        if len(tokens) < needed:
            if last and position == len(data_rows) - 1:
                return (
                    f"{file_name}: line {line_number} is incomplete ({len(tokens)} of {needed} fields): "
                    "the log looks truncated; the complete rows before it were imported"
                )
            raise ResultFileError(
                f"{file_name}: line {line_number} has {len(tokens)} fields where the header has {needed}"
            )
        size = int(tokens[0])
        if tokens[1].isdigit():
            rows.elements[(op, size)] = (int(tokens[1]), tokens[2] if group_starts[0] > 2 else "")
        for group, start in enumerate(group_starts):
            fields = dict(zip(header[start : start + group_width], tokens[start : start + group_width], strict=False))
            time_text = fields.get("time", fields.get("cputime", ""))
            try:
                time_us = float(time_text)
            except ValueError:
                continue  # 'N/A': this variant is not run for this op
            problem = times_problem(np.array([time_us]))
            if problem is not None:
                raise ResultFileError(
                    f"{file_name}: line {line_number}, column 'time' ({_variant(group)}): "
                    f"{time_text!r} is not a valid time: {problem[1]}"
                )
            if fields.get("#wrong", "N/A").isdigit():
                rows.wrong[(op, size, _variant(group))] = int(fields["#wrong"])
            if fields.get("#wrong", "0") not in ("0", "N/A"):
                rows.wrong_lines.append(line_number)
            rows.collectives.append(op)
            rows.sizes.append(size)
            rows.variants.append(_variant(group))
            rows.times.append(time_us)
            rows.algbws.append(_float_or_nan(fields.get("algbw")))
            rows.busbws.append(_float_or_nan(fields.get("busbw")))
            key = (op, size, _variant(group))
            cells = {"time_us": time_text, "algbw_gbps": fields.get("algbw"), "busbw_gbps": fields.get("busbw")}
            rows.printed[key] = None if key in rows.printed else {k: v for k, v in cells.items() if _is_number(v)}
    return None


def _is_number(text: str | None) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def ranks_from_bandwidths(op: str, algbws: list[float], busbws: list[float]) -> int | None:
    """The rank count nccl-tests' busbw/algbw factor implies (2(n−1)/n, (n−1)/n), from the row with the
    largest algbw (the least rounded); None when the factor says nothing (broadcast, send/recv, n unclear)."""
    pairs = [(a, b) for a, b in zip(algbws, busbws, strict=True) if np.isfinite(a) and np.isfinite(b) and a > 0]
    if not pairs:
        return None
    algbw, busbw = max(pairs)
    factor = busbw / algbw
    scale = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "all_to_all": 1.0}.get(op)
    if scale is None or algbw < 1.0 or not 0 < factor < scale:
        return None
    ranks = round(scale / (scale - factor))
    # The cells carry two decimals: the implied factor must match n's to that precision.
    return ranks if ranks > 1 and abs(scale * (ranks - 1) / ranks * algbw - busbw) <= 0.01 else None


def parse_nccl_tests_stdout(text: str, file_name: str, collective: str | None) -> ParsedResult:
    lines = text.splitlines()
    headers = _header_indices(lines)
    if not headers:
        raise ResultFileError(f"{file_name}: no nccl-tests header row ('# size count type … time algbw busbw') found")
    warnings: list[str] = []
    rank_hosts: dict[int, str] = {}
    for line in lines[: headers[-1]]:
        if match := _RANK_LINE.match(line):
            rank_hosts[int(match.group(1))] = match.group(2)
    ranks, hosts = _ranks_and_hosts(rank_hosts)

    rows = _Rows()
    bounds = [*headers, len(lines)]
    previous_end = 0
    for section, header_index in enumerate(headers):
        header = lines[header_index].lstrip("#").split()
        preamble = "\n".join(lines[previous_end:header_index])
        next_header = bounds[section + 1]
        numbered = list(enumerate(lines[header_index + 1 : next_header], start=header_index + 2))
        data_rows = _data_rows(header, numbered)
        op, section_warnings = _section_op(
            preamble,
            header,
            data_rows,
            f"{file_name}: line {header_index + 1}",
            file_name if len(headers) == 1 else None,
            collective,
        )
        warnings.extend(section_warnings)
        # The next test's preamble starts after this test's last data row.
        previous_end = data_rows[-1][0] if data_rows else header_index + 1
        truncated = _read_section(rows, op, header, data_rows, file_name, last=section == len(headers) - 1)
        if truncated:
            warnings.append(truncated)
        for _, line in numbered:
            if match := _AVG_LINE.match(line.strip()):
                rows.reported_avg_busbw[op] = float(match.group(1))
    if not rows.times:
        raise ResultFileError(f"{file_name}: the nccl-tests log has a header but no complete data rows")
    if rows.wrong_lines:
        warnings.append(f"{file_name}: nccl-tests reported wrong elements (#wrong > 0) on lines {rows.wrong_lines}")
    if not any("truncated" in w for w in warnings) and not any(
        line.startswith("# Avg bus bandwidth") for line in lines[headers[-1] :]
    ):
        warnings.append(f"{file_name}: no '# Avg bus bandwidth' footer: the log may be truncated")
    warnings.append(
        "nccl-tests prints the mean time over its timed iterations: each size is one sample (use -J with -I 1 "
        "for per-iteration samples)"
    )
    if ranks is None and len(set(rows.collectives)) == 1:
        ranks = ranks_from_bandwidths(rows.collectives[0], rows.algbws, rows.busbws)
        if ranks is not None:
            warnings.append(f"{file_name}: no rank lines; {ranks} ranks inferred from the busbw/algbw factor")
    return ParsedResult(
        samples=samples_table(
            duration_us=np.array(rows.times),
            iteration=np.zeros(len(rows.times), dtype=np.int64),
            collective=pa.array(rows.collectives),
            size_bytes=np.array(rows.sizes, dtype=np.int64),
            variant=pa.array(rows.variants),
            algbw_gbps=_nan_to_null(rows.algbws),
            busbw_gbps=_nan_to_null(rows.busbws),
        ),
        source_format=NCCL_TESTS,
        ranks=ranks,
        hosts=hosts,
        warnings=warnings,
        reported_avg_busbw=rows.reported_avg_busbw,
        elements=rows.elements,
        printed={key: cells for key, cells in rows.printed.items() if cells},
        wrong=rows.wrong,
    )


def _variant(group: int) -> str:
    return _VARIANT_NAMES[group] if group < len(_VARIANT_NAMES) else f"variant-{group}"


def _float_or_nan(text: str | None) -> float:
    try:
        return float(text) if text is not None else float("nan")
    except ValueError:
        return float("nan")


def _nan_to_null(values: list[float]) -> pa.Array:
    array = np.array(values, dtype=np.float64)
    return pa.array(array, mask=np.isnan(array))


def parse_nccl_tests_json(document: dict, file_name: str, collective: str | None) -> ParsedResult:
    results = document.get("results")
    if not isinstance(results, list):
        raise ResultFileError(f"{file_name}: JSON without a 'results' list is not an nccl-tests -J report")
    args = document.get("args") or []
    named = collective_from_text(" ".join(str(a) for a in args[:1]))
    cells = _json_cells(results)
    fitting = collectives_fitting_cells(cells) if cells is not None else None
    op, warnings = choose_collective(file_name, named, fitting, collective, file_name)
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
    ranks, hosts = _ranks_and_hosts(rank_hosts)
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
            algbw_gbps=_nan_to_null(np.concatenate(algbws).tolist()),
            busbw_gbps=_nan_to_null(np.concatenate(busbws).tolist()),
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


def _json_cells(results: list) -> Cells | None:
    """The cells of the report's largest size (``writeBenchmarkLinePreamble`` writes redop and root as text)."""
    sized = [r for r in results if isinstance(r, dict) and isinstance(r.get("size"), int) and r["size"] > 0]
    if not sized:
        return None
    result = max(sized, key=lambda r: r["size"])
    out_of_place = result.get("out_of_place") if isinstance(result.get("out_of_place"), dict) else {}
    count = result.get("count")
    return Cells(
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


def load_json(data: bytes, file_name: str) -> dict:
    try:
        document = json_input.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultFileError(f"{file_name}: not valid JSON ({error})") from error
    if not isinstance(document, dict):
        raise ResultFileError(f"{file_name}: expected a JSON object (an nccl-tests -J report)")
    return document
