"""nccl-tests / rccl-tests stdout: a ``#`` preamble (``# Collective test starting: all_reduce_perf``,
``#  Rank  3 Group 0 Pid … on HOST device …``), a header row read by name — current nccl-tests print ``size count
type redop root`` then ``time algbw busbw #wrong`` for out-of-place and again for in-place; before NCCL 2.13
there is no ``root`` (except for rooted ops) and ``error`` replaces ``#wrong``, and all_gather has no ``redop``
— and one data row per size. Every (size, variant) becomes one sample whose duration is the mean over the
benchmark's ``iters``. Which collective each test ran: ``results.formats.nccl_tests_shared``.
"""

import re

import numpy as np
import pyarrow as pa

from emuplan.results.canonical import ParsedResult, ResultFileError, samples_table, times_problem
from emuplan.results.formats import NCCL_TESTS
from emuplan.results.formats.nccl_tests_shared import (
    RANKS_INFERRED,
    Cells,
    choose_collective,
    collective_from_text,
    collectives_fitting_cells,
    nan_to_null,
    ranks_and_hosts,
    ranks_from_bandwidths,
)
from emuplan.results.formats.upload import Upload

_AVG_LINE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_RANK_LINE = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)")
_TIME_TOKENS = ("time", "cputime")
_VARIANT_NAMES = ("out-of-place", "in-place")


# What launchers put before every line of a job's output: srun -l's task number (" 0: ") and Open MPI's
# --tag-output ("[1,0]<stdout>:"). nccl-tests#290's logs arrive so.
_LAUNCHER_PREFIX = re.compile(r"^(?:\s*\d+: |\[\d+,\d+\]<std(?:out|err)>:)")


def without_launcher_prefix(text: str) -> str:
    """The log as nccl-tests printed it: a launcher's prefix taken off every line, when its first line has one."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    if not _LAUNCHER_PREFIX.match(first):
        return text
    return "\n".join(_LAUNCHER_PREFIX.sub("", line, count=1) for line in text.splitlines())


def recognises(upload: Upload) -> bool:
    """A header row in the head; or, in a file that starts with '#', anywhere (a long preamble, NCCL_DEBUG lines)."""
    head = without_launcher_prefix(upload.text_head)
    return _has_header(head) or (head.lstrip().startswith("#") and _has_header(without_launcher_prefix(upload.text())))


def _has_header(text: str) -> bool:
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


def parse(upload: Upload) -> ParsedResult:
    # The log's lines take about its size.
    upload.budget.holds(upload.size, upload.file_name)
    file_name, collective = upload.file_name, upload.collective
    lines = without_launcher_prefix(upload.text()).splitlines()
    headers = _header_indices(lines)
    if not headers:
        raise ResultFileError(f"{file_name}: no nccl-tests header row ('# size count type … time algbw busbw') found")
    warnings: list[str] = []
    rank_hosts: dict[int, str] = {}
    for line in lines[: headers[-1]]:
        if match := _RANK_LINE.match(line):
            rank_hosts[int(match.group(1))] = match.group(2)
    ranks, hosts = ranks_and_hosts(rank_hosts)
    # Rank lines left out ("...", or one line pasted): the highest index printed says there are more.
    elided = bool(rank_hosts) and max(rank_hosts) + 1 > len(rank_hosts)
    if elided:
        ranks, hosts = None, None

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
        lines_say = (
            f"rank lines up to rank {max(rank_hosts)} printed, {len(rank_hosts)} of them" if elided else "no rank lines"
        )
        if ranks is not None:
            warnings.append(f"{file_name}: {lines_say}; {ranks} {RANKS_INFERRED} the busbw/algbw factor")
        elif elided:
            ranks = max(rank_hosts) + 1
            warnings.append(f"{file_name}: {lines_say}; {ranks} {RANKS_INFERRED} the highest rank printed")
    return ParsedResult(
        samples=samples_table(
            duration_us=np.array(rows.times),
            iteration=np.zeros(len(rows.times), dtype=np.int64),
            collective=pa.array(rows.collectives),
            size_bytes=np.array(rows.sizes, dtype=np.int64),
            variant=pa.array(rows.variants),
            algbw_gbps=nan_to_null(rows.algbws),
            busbw_gbps=nan_to_null(rows.busbws),
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
