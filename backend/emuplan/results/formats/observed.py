"""What a training job really sent, from its own records: NCCL Inspector dumps and PyTorch profiler traces.

Each format module of ``OBSERVED_FORMATS`` (``nccl_inspector``, ``pytorch_profiler``), found through the registry
(``results.formats``), says whether a file is its own (``looks_like(head)``) and turns one file into rank calls
(``file_calls(content, file_name, budget)``; ``rank_calls``), then names the job's ranks (``named_ranks``): one
rank's record of one collective call, as ``RankCall`` objects or, for an Inspector dump's millions, as a table.
Here the files of one job (many uploads, or a zip/tar of them) become one run, joined as columns: a call is the
same (communicator, call key) on every rank that recorded it; its sample is the slowest rank's time (a collective
ends when its last rank does), every rank's time goes to the per-rank table (stragglers as for nccl-tests
``-J``), and the variant column names the communicator, so groups are per (collective, size, communicator). Sizes
follow nccl-tests (the whole buffer), so our busbw uses the project's factor on them; the file's own busbw is kept
beside it.

The run's summary keeps ``observed`` (``ParsedResult.observed``): the communicators (size, ranks, hosts), the
training steps the records fall in, and per group the calls inside those steps: what the plan comparison
(``plan_vs_observed``) reads.
"""

import itertools
import struct
import tarfile
import zipfile
import zlib
from collections import defaultdict
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from emuplan.results.budget import ImportBudget
from emuplan.results.canonical import (
    INT64_LIMIT,
    ParsedResult,
    ResultFileError,
    ResultFileTooLarge,
    rank_times_table,
    samples_table,
)
from emuplan.results.containers.gzip_input import GZIP_MAGIC, gunzip_capped
from emuplan.results.formats import BY_NAME, NCCL_INSPECTOR, TORCH_PROFILER, format_module
from emuplan.results.formats.rank_calls import RANK_CALLS_SCHEMA, FileCalls, OnlyPointToPoint
from emuplan.results.formats.upload import HEAD_BYTES, numbers_named
from emuplan.wording import plural
from emuplan.workload.collectives import bus_bandwidth_gbps, normalise_op_name

OBSERVED_FORMATS = (NCCL_INSPECTOR, TORCH_PROFILER)
ZIP_MAGIC = b"PK\x03\x04"
TAR_MAGIC_OFFSET = 257
TAR_MAGIC = b"ustar"
# An archive member is read this much at a time, each chunk charged before it is kept.
MEMBER_CHUNK_BYTES = 1024**2
# The zip methods read: the others are refused by name (see ``archive_members``).
ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
ZIP_ENCRYPTED = 0x1
# A zip member's local header: signature, 22 bytes we do not need, the lengths of its name and extra field.
ZIP_LOCAL_HEADER = struct.Struct("<4s22xHH")
NEITHER_FORMAT = "neither an NCCL Inspector dump nor a PyTorch profiler trace"
# A zip's end record (the entries it states, its central directory's size), searched for in its last 22 bytes and
# the longest comment after them; the ZIP64 end record a locator 20 bytes before it points to, for larger archives.
ZIP_END = struct.Struct("<4s6xHI")
ZIP_END_MAGIC = b"PK\x05\x06"
ZIP_END_SEARCH = 22 + 65535
ZIP64_LOCATOR = b"PK\x06\x07"
ZIP64_END = struct.Struct("<4s28xQQ")
ZIP64_END_MAGIC = b"PK\x06\x06"
# zipfile holds an object per central entry (46 bytes and a name) whatever count the end record states: a central
# directory larger than this per member allowed is refused before it is read (a 1 GiB upload of empty members
# would have been ~20 M objects).
ZIP_DIRECTORY_BYTES_PER_MEMBER = 1024


def is_archive(head: bytes) -> bool:
    return head.startswith(ZIP_MAGIC) or head[TAR_MAGIC_OFFSET : TAR_MAGIC_OFFSET + len(TAR_MAGIC)] == TAR_MAGIC


def recognises(head: bytes) -> bool:
    """An archive, or the start of an Inspector dump or a profiler trace (read by those modules)."""
    return is_archive(head) or _format_of(head) is not None


def _format_of(head: bytes) -> str | None:
    """The observed format whose file starts with ``head``, in ``OBSERVED_FORMATS``' order; None for neither."""
    return next((name for name in OBSERVED_FORMATS if _reader(name).looks_like(head)), None)


def _reader(name: str) -> ModuleType:
    return format_module(BY_NAME[name])


def archive_members(
    content: bytes | memoryview, file_name: str, budget: ImportBudget, *, check_heads: bool = True
) -> Iterator[tuple[str, bytes]]:
    """The regular files of a zip or tar (directories and hidden files skipped) in the order of their names, one
    at a time (a dump directory is read a file at a time).

    Nothing is trusted before it is counted: the members are capped in number and each charged
    ``ARCHIVE_MEMBER_BYTES`` before any is read; every byte a member decompresses to is charged to ``budget`` as it
    is produced, ``MEMBER_CHUNK_BYTES`` at a time; a zip member is refused once it passes the size its entry
    declares, and unless it is stored or deflated (Python decompresses bzip2 and LZMA a whole compressed block at
    a time: 4.6 KB of bzip2 became 8 GB before a byte could be counted). ``check_heads``: refuse a member whose
    first chunk is neither gzip, a dump nor a trace before reading on (off when the caller names the format)."""
    # Read in place: a copy of a gunzipped tar (a memoryview) doubled what its gzip cap allowed.
    data = pa.BufferReader(content)
    try:
        if bytes(content[: len(ZIP_MAGIC)]) == ZIP_MAGIC:
            _refuse_a_large_zip_directory(content, file_name, budget.limits.max_archive_members)
            archive = zipfile.ZipFile(data)
            headers = archive.infolist()
            entries = [(i.filename, i) for i in headers if not i.is_dir()]
        else:
            # "r:": a plain tar only (a gzipped one is gunzipped under the budget before it gets here).
            archive = tarfile.open(fileobj=data, mode="r:")  # noqa: SIM115 (closed once its members are read)
            # Headers are read lazily: one past the cap is enough to refuse.
            headers = list(itertools.islice(archive, budget.limits.max_archive_members + 1))
            entries = [(i.name, i) for i in headers if i.isfile()]
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as error:
        raise ResultFileError(f"{file_name}: not a readable zip or tar archive ({error})") from error
    budget.count_members(len(headers), file_name)
    entries = sorted((entry for entry in entries if not _hidden(entry[0])), key=lambda entry: entry[0])
    if not entries:
        raise ResultFileError(f"{file_name}: the archive holds no files")
    with archive:
        for name, info in entries:
            path = f"{file_name}/{name}"
            chunks = []
            try:
                for chunk in _member_chunks(archive, info, content, path):
                    budget.decompressed(len(chunk), path)
                    if check_heads and not chunks and not _readable_member(chunk[:HEAD_BYTES]):
                        raise ResultFileError(f"{path}: {NEITHER_FORMAT}")
                    chunks.append(chunk)
            except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as error:
                raise ResultFileError(f"{path}: not readable from the archive ({error})") from error
            member = b"".join(chunks)
            del chunks
            yield path, member


def _refuse_a_large_zip_directory(content: bytes | memoryview, file_name: str, max_members: int) -> None:
    """Refuse a zip whose end record states more members than allowed, or a central directory larger than they
    take, before ``zipfile`` reads its entries; a record that cannot be read is left for ``zipfile`` to name."""
    tail = bytes(content[-ZIP_END_SEARCH:])
    at = tail.rfind(ZIP_END_MAGIC)
    if at < 0 or at + ZIP_END.size > len(tail):
        return
    _, members, directory_bytes = ZIP_END.unpack_from(tail, at)
    if at >= 20 and tail[at - 20 : at - 16] == ZIP64_LOCATOR:
        (offset,) = struct.unpack_from("<Q", tail, at - 12)
        record = bytes(content[offset : offset + ZIP64_END.size])
        if len(record) == ZIP64_END.size and record.startswith(ZIP64_END_MAGIC):
            _, members, directory_bytes = ZIP64_END.unpack(record)
    if members > max_members:
        raise ResultFileTooLarge(f"{file_name}: more than {max_members} members (EMUPLAN_MAX_ARCHIVE_MEMBERS)")
    if directory_bytes > max_members * ZIP_DIRECTORY_BYTES_PER_MEMBER:
        raise ResultFileTooLarge(
            f"{file_name}: a central directory of {directory_bytes} bytes, more than {max_members} members take "
            "(EMUPLAN_MAX_ARCHIVE_MEMBERS)"
        )


def _readable_member(head: bytes) -> bool:
    return head.startswith(GZIP_MAGIC) or _format_of(head) is not None


def _member_chunks(
    archive: zipfile.ZipFile | tarfile.TarFile,
    info: zipfile.ZipInfo | tarfile.TarInfo,
    content: bytes | memoryview,
    path: str,
) -> Iterator[bytes]:
    """One member's content, ``MEMBER_CHUNK_BYTES`` at most a chunk."""
    if isinstance(info, tarfile.TarInfo):
        # A tar member is stored: its bytes are the (already charged) archive's own, its size its header's.
        member = archive.extractfile(info)
        yield from iter(lambda: member.read(MEMBER_CHUNK_BYTES), b"")
        return
    yield from _zip_member_chunks(info, content, path)


def _zip_member_chunks(info: zipfile.ZipInfo, content: bytes | memoryview, path: str) -> Iterator[bytes]:
    """A zip member inflated here rather than by ``zipfile``, whose reader inflates up to 2 GiB in one call
    before it cuts the output at the declared size: each chunk is checked against that size as it comes, and the
    whole against the entry's CRC-32."""
    if info.compress_type not in ZIP_METHODS:
        method = zipfile.compressor_names.get(info.compress_type, f"method {info.compress_type}")
        raise ResultFileError(
            f"{path}: compressed with {method}; only stored and deflate zip members are read "
            "(zip's default, or compress each file with gzip)"
        )
    if info.flag_bits & ZIP_ENCRYPTED:
        raise ResultFileError(f"{path}: encrypted; upload the archive without a password")
    try:
        signature, name_length, extra_length = ZIP_LOCAL_HEADER.unpack_from(content, max(info.header_offset, 0))
    except struct.error:  # the header would lie past the end
        signature, name_length, extra_length = b"", 0, 0
    start = info.header_offset + ZIP_LOCAL_HEADER.size + name_length + extra_length
    raw = memoryview(content)[start : start + info.compress_size]
    if signature != ZIP_MAGIC or len(raw) < info.compress_size:
        raise ResultFileError(f"{path}: not readable from the archive (its data is cut short)")
    inflate = zlib.decompressobj(-zlib.MAX_WBITS) if info.compress_type == zipfile.ZIP_DEFLATED else None
    produced = crc = 0
    while True:
        if inflate is None:
            chunk, raw = bytes(raw[:MEMBER_CHUNK_BYTES]), raw[MEMBER_CHUNK_BYTES:]
        else:
            chunk = inflate.decompress(raw, MEMBER_CHUNK_BYTES)
            raw = inflate.unconsumed_tail
        if not chunk:
            break
        produced += len(chunk)
        if produced > info.file_size:
            raise ResultFileError(f"{path}: decompresses past the {info.file_size} bytes its zip entry declares")
        crc = zlib.crc32(chunk, crc)
        yield chunk
    if produced != info.file_size or crc != info.CRC or (inflate is not None and not inflate.eof):
        raise ResultFileError(
            f"{path}: not readable from the archive (its data does not match its entry's size and CRC-32)"
        )


def _hidden(path: str) -> bool:
    return any(part.startswith((".", "__MACOSX")) for part in path.split("/") if part)


def parse_observed(
    files: list[tuple[str, bytes | memoryview]], fmt: str | None = None, *, budget: ImportBudget
) -> ParsedResult:
    """The files of one job (archives opened) as one run. All must be of one format: ``fmt`` or detected.
    What they decompress to, and what their records become, are charged to ``budget``; a file is dropped once
    read, so an archive's members are never all held at once."""
    if fmt is not None and fmt not in OBSERVED_FORMATS:
        raise ResultFileError(
            f"{files[0][0]}: a training job's files are read as {' or '.join(OBSERVED_FORMATS)}, not as {fmt}"
        )
    parsed: list[FileCalls] = []
    without_collectives: list[OnlyPointToPoint] = []
    for name, content in _expanded(files, budget, check_heads=fmt is None):
        head = bytes(content[:65536])
        detected = _format_of(head)
        if detected is None and fmt is None:
            raise ResultFileError(f"{name}: {NEITHER_FORMAT}")
        if fmt is not None and detected not in (None, fmt):
            raise ResultFileError(f"{name}: a {detected} file among {fmt} files; import each format on its own")
        fmt = fmt or detected
        with numbers_named(content, name):
            try:
                parsed.append(_reader(fmt).file_calls(content, name, budget))
            except OnlyPointToPoint as only:
                without_collectives.append(only)
    if not parsed and without_collectives:
        raise without_collectives[0]
    result = _merged(parsed, fmt)
    result.warnings += [str(only) for only in without_collectives]
    return result


def _expanded(files: list[tuple[str, bytes | memoryview]], budget: ImportBudget, *, check_heads: bool):
    """(name, content) of each file given, archives opened and gzip undone (one upload is gunzipped before it gets
    here; files given together and an archive's members are here)."""

    def gunzipped(name: str, content: bytes | memoryview) -> tuple[str, bytes | memoryview]:
        if bytes(content[:2]) == GZIP_MAGIC:
            return name, gunzip_capped(content, name, budget)
        return name, content

    for name, content in (gunzipped(*each) for each in files):
        if is_archive(bytes(content[:512])):
            members = archive_members(content, name, budget, check_heads=check_heads)
            yield from (gunzipped(*member) for member in members)
        else:
            yield name, content


def _merged(files: list[FileCalls], fmt: str) -> ParsedResult:
    """One run from the files' calls (see the module's docstring), joined as columns: a dump holds millions."""
    warnings = [warning for each in files for warning in each.warnings]
    keys = sorted({call.call_key for each in files for call in each.calls})
    key_codes = {key: code for code, key in enumerate(keys)}
    tables = [_table(each, key_codes) for each in files]
    calls = pa.concat_tables(
        table.append_column("file", pa.array(np.full(table.num_rows, index, dtype=np.int64)))
        for index, table in enumerate(tables)
    )
    calls = _reader(fmt).named_ranks(calls)
    calls = calls.unify_dictionaries()  # one dictionary per text column over the files' chunks
    job = _Job(calls, files, keys)
    job.check_calls_agree()
    slowest = job.slowest[job.sample_order]
    starts = job.first_start[job.sample_order]
    samples = samples_table(
        duration_us=job.duration[slowest],
        collective=calls.column("collective").take(slowest),
        size_bytes=job.size[slowest],
        start_us=pa.array(np.where(np.isinf(starts), np.nan, starts), pa.float64(), from_pandas=True),
        variant=calls.column("communicator").take(slowest),
        algbw_gbps=calls.column("reported_algbw_gbps").take(slowest),
        busbw_gbps=calls.column("reported_busbw_gbps").take(slowest),
    )
    # Every rank's record, by call as the samples are, each call's in the order the files gave them.
    sample_of_record = job.sample_of_call[job.call_of_record]
    by_sample = np.lexsort((np.arange(calls.num_rows), sample_of_record))
    rank_times = rank_times_table(
        duration_us=job.duration[by_sample],
        sample=sample_of_record[by_sample],
        rank=calls.column("rank").take(by_sample),
        host=calls.column("host").take(by_sample),
    )
    sizes = job.group_sizes(by_sample)
    group_sizes = set(sizes.values())
    ranks = group_sizes.pop() if len(group_sizes) == 1 else None
    if ranks is None and len(sizes) > 1:
        warnings.append("communicators of different sizes: busbw is the file's own (ours needs one group size per run)")
    hosts = sorted(host for host in pc.unique(calls.column("host")).to_pylist() if host)
    expected = np.array([sizes[name] or 0 for name in job.communicators.dictionary.to_pylist()], dtype=np.int64)
    expected = expected[job.communicator[job.first_record]]
    missing = int(((expected > 0) & (expected != job.records_per_call)).sum())
    if missing:
        warnings.append(f"{plural(missing, 'call')} not recorded by every rank of its communicator")
    elements: dict[tuple[str, int], tuple[int, str]] = {}
    if calls.column("elements").null_count < calls.num_rows:
        # One take of the slowest records, not a slice each: 90 µs a call, 1.9 s of a 100 k-event trace's import.
        chosen = calls.select(["collective", "size_bytes", "elements", "dtype"]).take(slowest).to_pydict()
        for collective, size, count, dtype in zip(*chosen.values(), strict=True):
            if count is not None:
                elements[(collective, size)] = (count, dtype)
    return ParsedResult(
        samples=samples,
        source_format=fmt,
        ranks=ranks,
        hosts=len(hosts) or None,
        warnings=warnings,
        rank_times=rank_times,
        rank_unit="rank",
        rank_basis="the rank's own time for the call, as its record states it (a call ends with its slowest rank)",
        elements=elements,
        observed=_observed_document(files, job, samples, sizes),
    )


def _table(each: FileCalls, key_codes: dict[tuple, int]) -> pa.Table:
    """A file's calls in ``RANK_CALLS_SCHEMA``: its own table, or its ``RankCall`` list as one (``line`` indexing
    the list, ``call`` the call key's place among the job's)."""
    if each.table is not None:
        return each.table
    for call in each.calls:
        if call.size_bytes >= INT64_LIMIT:
            raise ResultFileError(f"{call.where}: a size of {call.size_bytes} B does not fit a 64-bit integer")
    columns = {field.name: [] for field in RANK_CALLS_SCHEMA}
    for line, call in enumerate(each.calls):
        for name in ("communicator", "group_size", "collective", "size_bytes", "rank", "host", "duration_us"):
            columns[name].append(getattr(call, name))
        for name in ("start_us", "step", "reported_algbw_gbps", "reported_busbw_gbps", "elements", "dtype"):
            columns[name].append(getattr(call, name))
        columns["call"].append(key_codes[call.call_key])
        columns["line"].append(line)
        columns["process"].append(None)
    return pa.table(columns, schema=RANK_CALLS_SCHEMA)


class _Job:
    """The records of one job grouped into calls: a call is one (communicator, call key); ``first_record``,
    ``slowest`` and ``first_start`` are per call, in the order of (communicator, call key); ``sample_order`` puts
    the calls in the samples' order: by their earliest start, then call key, then the file order."""

    def __init__(self, calls: pa.Table, files: list[FileCalls], keys: list[tuple]):
        self.calls, self.files, self.keys = calls, files, keys
        self.communicators = pc.dictionary_encode(calls.column("communicator")).combine_chunks()
        self.communicator = self.communicators.indices.to_numpy()
        self.call = calls.column("call").to_numpy()
        self.duration = calls.column("duration_us").to_numpy()
        self.size = calls.column("size_bytes").to_numpy()
        record = np.arange(calls.num_rows)
        order = np.lexsort((record, self.call, self.communicator))
        starts = np.r_[True, (np.diff(self.communicator[order]) != 0) | (np.diff(self.call[order]) != 0)]
        self.call_of_record = np.empty(calls.num_rows, dtype=np.int64)
        self.call_of_record[order] = np.cumsum(starts) - 1
        bounds = np.flatnonzero(starts)
        self.first_record = order[bounds]
        self.records_per_call = np.diff(np.r_[bounds, calls.num_rows])
        start = calls.column("start_us").to_numpy(zero_copy_only=False)
        self.first_start = np.minimum.reduceat(np.where(np.isnan(start), np.inf, start)[order], bounds)
        steps = calls.column("step").is_valid().to_numpy(zero_copy_only=False)
        self.in_steps = np.logical_or.reduceat(steps[order], bounds)
        # The slowest rank's record of each call (the first of them when two took as long).
        by_time = np.lexsort((record, -self.duration, self.call_of_record))
        self.slowest = by_time[np.r_[True, np.diff(self.call_of_record[by_time]) != 0]]
        self.sample_order = np.lexsort((self.first_record, self.call[self.first_record], self.first_start))
        self.sample_of_call = np.empty(len(bounds), dtype=np.int64)
        self.sample_of_call[self.sample_order] = np.arange(len(bounds))

    def where(self, row: int) -> str:
        file = self.files[self.calls.column("file")[row].as_py()]
        return file.where(self.calls.column("line")[row].as_py())

    def check_calls_agree(self) -> None:
        """Refuse a rank that recorded one call twice, and ranks that disagree on a call's collective or size;
        the first record at fault (by call, then record) is named with the one it contradicts."""
        rank = pc.dictionary_encode(self.calls.column("rank")).combine_chunks().indices.to_numpy()
        record = np.arange(self.calls.num_rows)
        by_rank = np.lexsort((record, rank, self.call_of_record))
        twice = (np.diff(self.call_of_record[by_rank]) == 0) & (np.diff(rank[by_rank]) == 0)
        again = np.full(self.calls.num_rows, -1)
        again[by_rank[1:][twice]] = by_rank[:-1][twice]
        collective = pc.dictionary_encode(self.calls.column("collective")).combine_chunks().indices.to_numpy()
        first = self.first_record[self.call_of_record]
        differs = (collective != collective[first]) | (self.size != self.size[first])
        faults = np.flatnonzero((again >= 0) | differs)
        if not len(faults):
            return
        row = int(faults[np.lexsort((faults, first[faults]))[0]])
        names = self.calls.select(["communicator", "rank", "collective", "size_bytes", "call"])
        other, earlier = names.slice(row, 1).to_pylist()[0], names.slice(int(first[row]), 1).to_pylist()[0]
        if again[row] >= 0:
            raise ResultFileError(
                f"{self.where(row)}: rank {other['rank']} recorded this call already in {self.where(int(again[row]))} "
                "(the same rank's file given twice?)"
            )
        key = self.keys[other["call"]] if self.keys else (other["call"],)
        raise ResultFileError(
            f"{self.where(row)}: call {key} of communicator {other['communicator'] or '(unnamed)'} is "
            f"{other['collective']} of {other['size_bytes']} B, but {self.where(int(first[row]))} recorded "
            f"{earlier['collective']} of {earlier['size_bytes']} B"
        )

    def group_sizes(self, by_sample: np.ndarray) -> dict[str, int | None]:
        """Each communicator's size, as its last record in the samples' order states it."""
        communicator = self.communicator[by_sample]
        last = len(by_sample) - 1 - np.unique(communicator[::-1], return_index=True)[1]
        names = self.communicators.dictionary.to_pylist()
        group_size = self.calls.column("group_size").take(by_sample[last]).to_pylist()
        return {names[code]: size for code, size in zip(communicator[last], group_size, strict=True)}


def _observed_document(files: list[FileCalls], job: _Job, samples: pa.Table, sizes: dict[str, int | None]) -> dict:
    """The communicators, the steps seen, and per (collective, size, communicator) the calls in all and
    inside those steps (a call counts in a step when any of its records falls in one), the mean time of a
    call, and busbw at that mean with the communicator's own size (the run's statistics need one rank count
    for the whole run; a job's communicators differ) beside the file's own busbw, averaged like the time."""
    members: dict[str, set[str]] = defaultdict(set)
    hosts: dict[str, set[str]] = defaultdict(set)
    for each in files:
        for communicator, ranks in each.members.items():
            members[communicator] |= ranks
    pairs = job.calls.group_by(["communicator", "rank", "host"], use_threads=False).aggregate([]).to_pylist()
    for pair in pairs:
        members[pair["communicator"]].add(pair["rank"])
        if pair["host"]:
            hosts[pair["communicator"]].add(pair["host"])
    steps = sorted(set().union(*(each.steps for each in files)))
    # Groups in the order their first call comes in the samples.
    columns = samples.select(["collective", "size_bytes", "variant"])
    codes = [pc.dictionary_encode(columns.column(name)).combine_chunks() for name in ("collective", "variant")]
    keys = np.stack([codes[0].indices.to_numpy(), columns.column("size_bytes").to_numpy(), codes[1].indices.to_numpy()])
    _, first_sample, group_of_sample = np.unique(keys.T, axis=0, return_index=True, return_inverse=True)
    group_of_sample = group_of_sample.reshape(-1)
    by_group = np.lexsort((np.arange(len(group_of_sample)), group_of_sample))
    bounds = np.r_[0, np.flatnonzero(np.diff(group_of_sample[by_group])) + 1, len(by_group)]
    times = samples.column("duration_us").to_numpy()
    reported = samples.column("busbw_gbps").to_numpy(zero_copy_only=False)
    in_steps = job.in_steps[job.sample_order]
    groups = []
    for group in np.argsort(first_sample, kind="stable"):
        members_of_group = by_group[bounds[group] : bounds[group + 1]]
        first = samples.slice(int(members_of_group[0]), 1).to_pylist()[0]
        mean_us = float(np.mean(times[members_of_group]))
        busbws = reported[members_of_group]
        busbws = busbws[~np.isnan(busbws)]
        op = normalise_op_name(first["collective"])
        group_size = sizes[first["variant"]]
        ours = op is not None and group_size and mean_us > 0
        groups.append(
            {
                "collective": first["collective"],
                "size_bytes": first["size_bytes"],
                "communicator": first["variant"],
                "group_size": group_size,
                "calls": len(members_of_group),
                "calls_in_steps": int(in_steps[members_of_group].sum()),
                "mean_us": mean_us,
                "busbw_gbps": bus_bandwidth_gbps(op, first["size_bytes"], mean_us * 1e-6, group_size) if ours else None,
                "reported_busbw_gbps": float(np.mean(busbws)) if len(busbws) else None,
            }
        )
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
        "groups": groups,
    }


def _rank_order(rank: str) -> tuple[int, str]:
    return (int(rank), "") if rank.isdigit() else (1 << 62, rank)
