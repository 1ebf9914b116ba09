"""What a training job really sent, from its own records: NCCL Inspector dumps and PyTorch profiler traces.

Each format module (``nccl_inspector``, ``torch_profiler``) turns one file into ``RankCall`` rows: one rank's
record of one collective call. Here the files of one job (many uploads, or a zip/tar of them) become one
run: a call is the same (communicator, call key) on every rank that recorded it; its sample is the slowest
rank's time (a collective ends when its last rank does), every rank's time goes to the per-rank table
(stragglers as for nccl-tests ``-J``), and the variant column names the communicator, so groups are per
(collective, size, communicator). Sizes follow nccl-tests (the whole buffer), so our busbw uses the project's
factor on them; the file's own busbw is kept beside it.

The run's summary keeps ``observed`` (``ParsedResult.observed``): the communicators (size, ranks, hosts), the
training steps the records fall in, and per group the calls inside those steps: what the plan comparison
(``plan_vs_observed``) reads.
"""

import io
import tarfile
import zipfile
from collections import defaultdict

import numpy as np
import pyarrow as pa

from emuplan.results import nccl_inspector, torch_profiler
from emuplan.results.budget import JSON_BYTES_PER_BYTE, ImportBudget
from emuplan.results.canonical import (
    INT64_LIMIT,
    NCCL_INSPECTOR,
    TORCH_PROFILER,
    ParsedResult,
    ResultFileError,
    rank_times_table,
    samples_table,
)
from emuplan.results.gzip_input import GZIP_MAGIC, gunzip_capped
from emuplan.results.rank_calls import FileCalls, RankCall
from emuplan.wording import plural
from emuplan.workload.collectives import bus_bandwidth_gbps, normalise_op_name

OBSERVED_FORMATS = (NCCL_INSPECTOR, TORCH_PROFILER)
ZIP_MAGIC = b"PK\x03\x04"
TAR_MAGIC_OFFSET = 257
TAR_MAGIC = b"ustar"


def is_archive(head: bytes) -> bool:
    return head.startswith(ZIP_MAGIC) or head[TAR_MAGIC_OFFSET : TAR_MAGIC_OFFSET + len(TAR_MAGIC)] == TAR_MAGIC


def archive_members(content: bytes | memoryview, file_name: str, budget: ImportBudget) -> list[tuple[str, bytes]]:
    """The regular files of a zip or tar (directories and hidden files skipped), each charged to ``budget`` at
    its stated size before it is extracted."""
    data = bytes(content)
    members: list[tuple[str, bytes]] = []

    def add(name: str, size: int, read) -> None:
        budget.decompressed(size, f"{file_name}/{name}")
        members.append((f"{file_name}/{name}", read()))

    try:
        if data.startswith(ZIP_MAGIC):
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for info in archive.infolist():
                    if not info.is_dir() and not _hidden(info.filename):
                        add(info.filename, info.file_size, lambda info=info: archive.read(info))
        else:
            with tarfile.open(fileobj=io.BytesIO(data)) as archive:
                for info in archive.getmembers():
                    if info.isfile() and not _hidden(info.name):
                        add(info.name, info.size, lambda info=info: archive.extractfile(info).read())
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as error:
        raise ResultFileError(f"{file_name}: not a readable zip or tar archive ({error})") from error
    if not members:
        raise ResultFileError(f"{file_name}: the archive holds no files")
    return sorted(members)


def _hidden(path: str) -> bool:
    return any(part.startswith((".", "__MACOSX")) for part in path.split("/") if part)


def parse_observed(
    files: list[tuple[str, bytes | memoryview]], fmt: str | None = None, *, budget: ImportBudget
) -> ParsedResult:
    """The files of one job (archives opened) as one run. All must be of one format: ``fmt`` or detected.
    What they decompress to, and the Python objects their JSON becomes, are charged to ``budget``."""

    def gunzipped(name: str, content: bytes | memoryview) -> tuple[str, bytes | memoryview]:
        # Files given together, and an archive's members (one upload is gunzipped before it gets here).
        if bytes(content[:2]) == GZIP_MAGIC:
            return name, gunzip_capped(content, name, budget)
        return name, content

    readers = {NCCL_INSPECTOR: nccl_inspector.file_calls, TORCH_PROFILER: torch_profiler.file_calls}
    expanded: list[tuple[str, bytes | memoryview]] = []
    for name, content in (gunzipped(*each) for each in files):
        if is_archive(bytes(content[:512])):
            members = archive_members(content, name, budget)
            expanded.extend(gunzipped(*member) for member in members)
        else:
            expanded.append((name, content))
    parsed: list[FileCalls] = []
    for name, content in expanded:
        head = bytes(content[:65536])
        detected = (
            NCCL_INSPECTOR
            if nccl_inspector.looks_like(head)
            else TORCH_PROFILER
            if torch_profiler.looks_like(head)
            else None
        )
        if detected is None and fmt is None:
            raise ResultFileError(f"{name}: neither an NCCL Inspector dump nor a PyTorch profiler trace")
        if fmt is not None and detected not in (None, fmt):
            raise ResultFileError(f"{name}: a {detected} file among {fmt} files; import each format on its own")
        fmt = fmt or detected
        budget.holds(len(content) * JSON_BYTES_PER_BYTE, name)  # the objects its JSON becomes, at most
        parsed.append(readers[fmt](content, name))
    return _merged(parsed, fmt)


def _merged(files: list[FileCalls], fmt: str) -> ParsedResult:
    """One run from the files' calls (see the module's docstring)."""
    warnings = [warning for each in files for warning in each.warnings]
    by_call: dict[tuple[str, tuple], list[RankCall]] = defaultdict(list)
    for each in files:
        for call in each.calls:
            by_call[(call.communicator, call.call_key)].append(call)
    for records in by_call.values():
        first, ranks = records[0], {records[0].rank: records[0]}
        if first.size_bytes >= INT64_LIMIT:
            raise ResultFileError(f"{first.where}: a size of {first.size_bytes} B does not fit a 64-bit integer")
        for other in records[1:]:
            if other.rank in ranks:
                raise ResultFileError(
                    f"{other.where}: rank {other.rank} recorded this call already in {ranks[other.rank].where} "
                    "(the same rank's file given twice?)"
                )
            ranks[other.rank] = other
            if (other.collective, other.size_bytes) != (first.collective, first.size_bytes):
                raise ResultFileError(
                    f"{other.where}: call {other.call_key} of communicator {other.communicator or '(unnamed)'} is "
                    f"{other.collective} of {other.size_bytes} B, but {first.where} recorded "
                    f"{first.collective} of {first.size_bytes} B"
                )
    ordered = sorted(by_call.values(), key=lambda records: (min(_start(r) for r in records), records[0].call_key))
    slowest = [max(records, key=lambda r: r.duration_us) for records in ordered]
    starts = [min(_start(r) for r in records) for records in ordered]
    samples = samples_table(
        duration_us=np.array([r.duration_us for r in slowest]),
        collective=pa.array([r.collective for r in slowest]),
        size_bytes=np.array([r.size_bytes for r in slowest], dtype=np.int64),
        start_us=pa.array([None if np.isinf(s) else s for s in starts], pa.float64()),
        variant=pa.array([r.communicator for r in slowest]),
        algbw_gbps=pa.array([r.reported_algbw_gbps for r in slowest], pa.float64()),
        busbw_gbps=pa.array([r.reported_busbw_gbps for r in slowest], pa.float64()),
    )
    rank_rows = [(sample, r) for sample, records in enumerate(ordered) for r in records]
    rank_times = rank_times_table(
        duration_us=np.array([r.duration_us for _, r in rank_rows]),
        sample=np.array([sample for sample, _ in rank_rows], dtype=np.int64),
        rank=pa.array([r.rank for _, r in rank_rows]),
        host=pa.array([r.host for _, r in rank_rows]),
    )
    sizes = {r.communicator: r.group_size for records in ordered for r in records}
    group_sizes = set(sizes.values())
    ranks = group_sizes.pop() if len(group_sizes) == 1 else None
    if ranks is None and len(sizes) > 1:
        warnings.append("communicators of different sizes: busbw is the file's own (ours needs one group size per run)")
    hosts = sorted({r.host for records in ordered for r in records if r.host})
    missing = sum(1 for records in ordered if sizes[records[0].communicator] not in (None, len(records)))
    if missing:
        warnings.append(f"{plural(missing, 'call')} not recorded by every rank of its communicator")
    return ParsedResult(
        samples=samples,
        source_format=fmt,
        ranks=ranks,
        hosts=len(hosts) or None,
        warnings=warnings,
        rank_times=rank_times,
        rank_unit="rank",
        rank_basis="the rank's own time for the call, as its record states it (a call ends with its slowest rank)",
        elements={(r.collective, r.size_bytes): (r.elements, r.dtype) for r in slowest if r.elements is not None},
        observed=_observed_document(files, ordered, sizes),
    )


def _start(call: RankCall) -> float:
    return call.start_us if call.start_us is not None else float("inf")


def _observed_document(files: list[FileCalls], ordered: list[list[RankCall]], sizes: dict[str, int | None]) -> dict:
    """The communicators, the steps seen, and per (collective, size, communicator) the calls in all and
    inside those steps (a call counts in a step when its first rank's record falls in it), the mean time of a
    call, and busbw at that mean with the communicator's own size (the run's statistics need one rank count
    for the whole run; a job's communicators differ) beside the file's own busbw, averaged like the time."""
    members: dict[str, set[str]] = defaultdict(set)
    hosts: dict[str, set[str]] = defaultdict(set)
    for each in files:
        for communicator, ranks in each.members.items():
            members[communicator] |= ranks
    for records in ordered:
        for r in records:
            members[r.communicator].add(r.rank)
            if r.host:
                hosts[r.communicator].add(r.host)
    steps = sorted(set().union(*(each.steps for each in files)))
    groups: dict[tuple[str, int, str], dict] = {}
    for records in ordered:
        first = records[0]
        key = (first.collective, first.size_bytes, first.communicator)
        group = groups.setdefault(
            key,
            {
                "collective": first.collective,
                "size_bytes": first.size_bytes,
                "communicator": first.communicator,
                "group_size": sizes[first.communicator],
                "calls": 0,
                "calls_in_steps": 0,
                "times_us": [],
                "reported_busbw_gbps": [],
            },
        )
        group["calls"] += 1
        group["calls_in_steps"] += any(r.step is not None for r in records)
        slowest = max(records, key=lambda r: r.duration_us)
        group["times_us"].append(slowest.duration_us)
        if slowest.reported_busbw_gbps is not None:
            group["reported_busbw_gbps"].append(slowest.reported_busbw_gbps)
    for group in groups.values():
        mean_us = float(np.mean(group.pop("times_us")))
        reported = group.pop("reported_busbw_gbps")
        op = normalise_op_name(group["collective"])
        ours = op is not None and group["group_size"] and mean_us > 0
        group["mean_us"] = mean_us
        group["busbw_gbps"] = (
            bus_bandwidth_gbps(op, group["size_bytes"], mean_us * 1e-6, group["group_size"]) if ours else None
        )
        group["reported_busbw_gbps"] = float(np.mean(reported)) if reported else None
    return {
        "steps": steps,
        "communicators": [
            {
                "id": communicator,
                "size": sizes.get(communicator),
                "ranks": sorted(members[communicator], key=_rank_order),
                "hosts": sorted(hosts[communicator]),
            }
            for communicator in sorted(members)
        ],
        "groups": list(groups.values()),
    }


def _rank_order(rank: str) -> tuple[int, str]:
    return (int(rank), "") if rank.isdigit() else (1 << 62, rank)
