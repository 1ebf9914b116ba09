"""The archive reader (``results.formats.observed.archive_members``): members read a chunk at a time, each checked
against its zip entry, counted and charged before any is read."""

import io
import struct
import zipfile
import zlib

import pytest

from archive_bombs import MEMBER, tar_of, zip_of
from emuplan.results import ResultFileError, parse_result_file
from emuplan.results.budget import ARCHIVE_MEMBER_BYTES, ImportBudget, ImportLimits
from emuplan.results.canonical import ResultFileTooLarge
from inspector_job import INSPECTOR_JOB

DUMP = INSPECTOR_JOB[0].read_bytes()
NEITHER = "neither an NCCL Inspector dump nor a PyTorch profiler trace"


def deflated(content: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(content) + compressor.flush()


def zipped(method: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for path in INSPECTOR_JOB:
            archive.write(path, f"dump/{path.name}")
    return buffer.getvalue()


def test_a_deflated_zip_reads_as_the_stored_one() -> None:
    stored, deflated_zip = (
        parse_result_file(zipped(method), "dump.zip") for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
    )
    assert deflated_zip.samples.to_pylist() == stored.samples.to_pylist()
    assert deflated_zip.samples.num_rows > 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            zipped(zipfile.ZIP_LZMA),
            "dump.zip/dump/constructed-gpu-a-pid101.log: compressed with lzma; only stored and deflate zip members "
            "are read (zip's default, or compress each file with gzip)",
        ),
        (
            zip_of(deflated(DUMP), method=zipfile.ZIP_DEFLATED, declared_size=len(DUMP), crc=zlib.crc32(DUMP), flags=1),
            f"dump.zip/{MEMBER}: encrypted; upload the archive without a password",
        ),
        (
            zip_of(deflated(DUMP), method=zipfile.ZIP_DEFLATED, declared_size=len(DUMP) - 1, crc=zlib.crc32(DUMP)),
            f"dump.zip/{MEMBER}: decompresses past the {len(DUMP) - 1} bytes its zip entry declares",
        ),
        (
            zip_of(deflated(DUMP), method=zipfile.ZIP_DEFLATED, declared_size=len(DUMP), crc=zlib.crc32(DUMP) ^ 1),
            f"dump.zip/{MEMBER}: not readable from the archive (its data does not match its entry's size and CRC-32)",
        ),
        (
            zip_of(DUMP, method=zipfile.ZIP_STORED, declared_size=len(DUMP) + 1, crc=zlib.crc32(DUMP)),
            f"dump.zip/{MEMBER}: not readable from the archive (its data does not match its entry's size and CRC-32)",
        ),
    ],
    ids=["lzma", "encrypted", "past its size", "wrong CRC-32", "short of its size"],
)
def test_a_zip_member_is_refused_by_what_is_wrong(data: bytes, message: str) -> None:
    with pytest.raises(ResultFileError) as refused:
        parse_result_file(data, "dump.zip")
    assert str(refused.value) == message


def test_an_honest_hand_made_zip_reads() -> None:
    data = zip_of(deflated(DUMP), method=zipfile.ZIP_DEFLATED, declared_size=len(DUMP), crc=zlib.crc32(DUMP))
    assert parse_result_file(data, "dump.zip").samples.num_rows > 0


def test_members_are_counted_and_charged_before_any_is_read() -> None:
    # A hidden file is skipped, yet counted: its header was read.
    files = {f"dump/{path.name}": path.read_bytes() for path in INSPECTOR_JOB} | {"dump/.DS_Store": b"x"}
    with ImportBudget(ImportLimits(max_archive_members=2)) as budget, pytest.raises(ResultFileTooLarge) as refused:
        parse_result_file(tar_of(files), "job.tar", budget=budget)
    assert str(refused.value) == "job.tar: more than 2 members (EMUPLAN_MAX_ARCHIVE_MEMBERS)"
    assert budget.decompressed_bytes == 0
    with ImportBudget(ImportLimits(max_archive_members=3)) as budget:
        parse_result_file(tar_of(files), "job.tar", budget=budget)
    # Each member's bytes as read, and its overhead beside them.
    read = sum(path.stat().st_size for path in INSPECTOR_JOB)
    assert budget.decompressed_bytes == read
    assert budget.held_bytes >= 3 * ARCHIVE_MEMBER_BYTES + read


def many_members_zip(members: int, name_bytes: int = 8) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for index in range(members):
            archive.writestr(f"d/{index:0{name_bytes}d}.log", b"")
    return buffer.getvalue()


def as_zip64(data: bytes) -> bytes:
    """``data`` with its end record pointing to a ZIP64 end record that holds the counts and sizes, as zip writes
    it past 65,535 members or 4 GiB."""
    end = data.rindex(b"PK\x05\x06")
    _, _, _, _, members, size, offset, _ = struct.unpack("<4s4H2IH", data[end : end + 22])
    zip64_end = struct.pack("<4sQ2H2I4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, members, members, size, offset)
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, end, 1)
    return (
        data[:end]
        + zip64_end
        + locator
        + struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, *[0xFFFF] * 2, *[0xFFFFFFFF] * 2, 0)
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (many_members_zip(11), "many.zip: more than 10 members (EMUPLAN_MAX_ARCHIVE_MEMBERS)"),
        # The end record in ZIP64 form (0xFFFF members stated): the count is read from the ZIP64 record.
        (as_zip64(many_members_zip(11)), "many.zip: more than 10 members (EMUPLAN_MAX_ARCHIVE_MEMBERS)"),
        (
            many_members_zip(3, name_bytes=4000),
            "many.zip: a central directory of 12156 bytes, more than 10 members take (EMUPLAN_MAX_ARCHIVE_MEMBERS)",
        ),
    ],
    ids=["stated count", "ZIP64", "directory size"],
)
def test_a_zip_is_refused_from_its_end_record_before_its_entries_are_read(data: bytes, message: str) -> None:
    with ImportBudget(ImportLimits(max_archive_members=10)) as budget, pytest.raises(ResultFileTooLarge) as refused:
        parse_result_file(data, "many.zip", budget=budget)
    assert str(refused.value) == message
    assert budget.held_bytes == 0


def test_a_zip64_archive_within_the_cap_is_read() -> None:
    """Its end record states 0xFFFF members: the ZIP64 record's 5 count, and its members are read."""
    with ImportBudget(ImportLimits(max_archive_members=10)) as budget, pytest.raises(ResultFileError) as refused:
        parse_result_file(as_zip64(many_members_zip(5)), "many.zip", budget=budget)
    assert str(refused.value) == f"many.zip/d/00000000.log: {NEITHER}"
