"""What a Parquet file's pages decompress and decode to, from their own headers, before any page is read.

Arrow trusts each page's header: it allocates the header's uncompressed size and decompresses into it. The
footer's sizes are the writer's word, not the pages': a footer rewritten to say 10 rows of a few bytes got a
200 MB page of zstd zeros decompressed whole. So every page header of every column chunk is read first (a few
bytes each, the page skipped by its compressed size) and the larger of the footer's and the headers' figures is
what the budget is charged.

The headers are Thrift structs in the compact protocol (parquet-format's PageHeader); pyarrow does not expose
them, so the few fields needed are read here.
"""

from dataclasses import dataclass

import pyarrow as pa

# PageHeader's fields, and the num_values (field 1) of its data page headers (v1, v2).
UNCOMPRESSED_PAGE_SIZE, COMPRESSED_PAGE_SIZE = 2, 3
DATA_PAGE_HEADER, DATA_PAGE_HEADER_V2 = 5, 8
NUM_VALUES = 1
# Compact protocol types.
BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
# Read this much at a time to find one header: most are a few dozen bytes, statistics make some longer.
HEADER_READ_BYTES = 256
MAX_HEADER_BYTES = 16 * 1024**2  # Arrow's own limit on a page header


class _Truncated(Exception):
    """The bytes read so far end inside the header: read more."""


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise _Truncated
        self.at += 1
        return self.data[self.at - 1]

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 70:
                raise ValueError("a page header's integer is too long")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def skip(self, count: int) -> None:
        if self.at + count > len(self.data):
            raise _Truncated
        self.at += count

    def value(self, kind: int):
        """A value of ``kind``: integers and structs read ({field: value}), everything else skipped (None)."""
        if kind in (BOOL_TRUE, BOOL_FALSE):
            return None
        if kind == BYTE:
            self.skip(1)
        elif kind in (I16, I32, I64):
            return self.zigzag()
        elif kind == DOUBLE:
            self.skip(8)
        elif kind == BINARY:
            self.skip(self.varint())
        elif kind in (LIST, SET):
            header = self.byte()
            size = header >> 4 if header >> 4 != 15 else self.varint()
            for _ in range(size):
                # A list's booleans take a byte each.
                self.skip(1) if header & 0x0F in (BOOL_TRUE, BOOL_FALSE) else self.value(header & 0x0F)
        elif kind == MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.value(types >> 4)
                    self.value(types & 0x0F)
        elif kind == STRUCT:
            return self.struct()
        else:
            raise ValueError(f"a page header holds an unknown Thrift type {kind}")
        return None

    def struct(self) -> dict[int, object]:
        fields: dict[int, object] = {}
        field = 0
        while (header := self.byte()) != 0:
            delta, kind = header >> 4, header & 0x0F
            field = field + delta if delta else self.zigzag()
            fields[field] = self.value(kind)
        return fields


@dataclass(frozen=True)
class ChunkPages:
    """What a column chunk's pages declare in their headers."""

    uncompressed_bytes: int
    values: int


def chunk_pages(source: pa.NativeFile, start: int, compressed_bytes: int) -> ChunkPages:
    """The sums of the page headers of the column chunk at ``start`` (its first page: the dictionary's, if any),
    ``compressed_bytes`` long. ``ValueError`` for a header that cannot be read or points outside the chunk."""
    uncompressed = values = 0
    at, end = start, start + compressed_bytes
    while at < end:
        read = HEADER_READ_BYTES
        while True:
            source.seek(at)
            reader = _Reader(source.read(min(read, end - at)))
            try:
                header = reader.struct()
                break
            except _Truncated:
                if read >= min(MAX_HEADER_BYTES, end - at):
                    raise ValueError(f"a page header at byte {at} runs past its column chunk") from None
                read *= 4
        page_bytes, stored_bytes = header.get(UNCOMPRESSED_PAGE_SIZE), header.get(COMPRESSED_PAGE_SIZE)
        if not isinstance(page_bytes, int) or not isinstance(stored_bytes, int) or min(page_bytes, stored_bytes) < 0:
            raise ValueError(f"the page header at byte {at} has no valid sizes")
        uncompressed += page_bytes
        for data_header in (header.get(DATA_PAGE_HEADER), header.get(DATA_PAGE_HEADER_V2)):
            if isinstance(data_header, dict) and isinstance(data_header.get(NUM_VALUES), int):
                values += max(0, data_header[NUM_VALUES])
        at += reader.at + stored_bytes
    return ChunkPages(uncompressed, values)
