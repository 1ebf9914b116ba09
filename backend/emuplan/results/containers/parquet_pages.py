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
# Read this much at a time: most headers are a few dozen bytes (statistics make some longer), so a window holds
# the headers of many small pages (200,000 one-value pages: 2.7 s read one at a time, 1.8 s in windows).
WINDOW_BYTES = 64 * 1024
# Pages a file may have: ~9 µs of Python each, so at most ~10 s for a file. Writers make pages of 1 MB or 20,000
# rows: 100 M rows of 10 columns are 50,000 pages; a file of 33-byte one-value pages could have 8 M in 256 MiB.
MAX_PAGES = 1_000_000
MAX_HEADER_BYTES = 16 * 1024**2  # Arrow's own limit on a page header


class TooManyPages(ValueError):
    """More pages than the reader allows (``MAX_PAGES``): reading their headers alone would hold the server long."""


class _Truncated(Exception):
    """The bytes read so far end inside the header: read more."""


class _Reader:
    def __init__(self, data: bytes, at: int):
        self.data = data
        self.at = at

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
    pages: int


def chunk_pages(source: pa.NativeFile, start: int, compressed_bytes: int, max_pages: int) -> ChunkPages:
    """The sums of the page headers of the column chunk at ``start`` (its first page: the dictionary's, if any),
    ``compressed_bytes`` long. ``ValueError`` for a header that cannot be read or points outside the chunk,
    ``TooManyPages`` past ``max_pages``."""
    uncompressed = values = pages = 0
    at, end = start, start + compressed_bytes
    window_start, window = at, b""
    while at < end:
        pages += 1
        if pages > max_pages:
            raise TooManyPages
        read = WINDOW_BYTES
        while True:
            if not window_start <= at < window_start + len(window):
                source.seek(at)
                window_start, window = at, source.read(min(read, end - at))
            reader = _Reader(window, at - window_start)
            try:
                header = reader.struct()
                break
            except _Truncated:
                if window_start + len(window) >= min(at + MAX_HEADER_BYTES, end):
                    raise ValueError(f"a page header at byte {at} runs past its column chunk") from None
                read = 4 * max(read, len(window))
                window = b""  # read again from this header on
        page_bytes, stored_bytes = header.get(UNCOMPRESSED_PAGE_SIZE), header.get(COMPRESSED_PAGE_SIZE)
        if not isinstance(page_bytes, int) or not isinstance(stored_bytes, int) or min(page_bytes, stored_bytes) < 0:
            raise ValueError(f"the page header at byte {at} has no valid sizes")
        uncompressed += page_bytes
        for data_header in (header.get(DATA_PAGE_HEADER), header.get(DATA_PAGE_HEADER_V2)):
            if isinstance(data_header, dict) and isinstance(data_header.get(NUM_VALUES), int):
                values += max(0, data_header[NUM_VALUES])
        at = window_start + reader.at + stored_bytes
    return ChunkPages(uncompressed, values, pages)
