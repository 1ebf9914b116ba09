"""Archives that lie or overwhelm, built byte by byte (``zipfile`` writes only honest ones): the audit's cases
against the archive reader (``results.formats.observed.archive_members``)."""

import bz2
import gzip
import io
import struct
import tarfile
import zipfile
import zlib

from inspector_job import INSPECTOR_JOB

MEMBER = "dump/rank0.log"


def zip_of(raw: bytes, *, method: int, declared_size: int, crc: int = 0, flags: int = 0, name: str = MEMBER) -> bytes:
    """One member of compressed bytes ``raw`` whose entry says ``method``, ``declared_size`` and ``crc``."""
    encoded = name.encode()
    sizes = (crc, len(raw), declared_size, len(encoded), 0)
    local = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, flags, method, 0, 0, *sizes)
    central = struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, flags, method, 0, 0, *sizes, 0, 0, 0, 0, 0)
    directory_offset = len(local) + len(encoded) + len(raw)
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, 1, 1, len(central) + len(encoded), directory_offset, 0)
    return local + encoded + raw + central + encoded + end


def deflated_zeros(mib: int) -> bytes:
    """A raw deflate stream of ``mib`` MiB of zeros, built from one compressed MiB repeated: a full flush leaves
    the compressor as it started, so the same MiB compresses to the same bytes again (2 GiB in 2 MB at once)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = compressor.compress(bytes(2**20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return block * mib + compressor.flush(zlib.Z_FINISH)


def bzip2_zip() -> bytes:
    """The audit's case, smaller: a member declaring 100 B holding 45 MB of bzip2 zeros (one block)."""
    return zip_of(bz2.compress(bytes(45_000_000)), method=zipfile.ZIP_BZIP2, declared_size=100)


def lying_deflate_zip() -> bytes:
    """A member declaring 100 B that inflates to 2 GiB of zeros."""
    return zip_of(deflated_zeros(2048), method=zipfile.ZIP_DEFLATED, declared_size=100)


def zeros_deflate_zip() -> bytes:
    """A member honestly declaring the 2 GiB of zeros it inflates to (its CRC-32 left wrong: never reached)."""
    return zip_of(deflated_zeros(2047), method=zipfile.ZIP_DEFLATED, declared_size=2047 * 2**20)


def many_members_tar_gz(members: int) -> bytes:
    """A tar.gz of ``members`` one-record dumps (the same name each time: tar allows it, and it is quick)."""
    record = INSPECTOR_JOB[0].read_bytes().splitlines(keepends=True)[0]
    info = tarfile.TarInfo(MEMBER)
    info.size = len(record)
    member = info.tobuf(format=tarfile.USTAR_FORMAT) + record.ljust(-(-len(record) // 512) * 512, b"\0")
    return gzip.compress(member * members + bytes(1024), 1)


def tar_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()
