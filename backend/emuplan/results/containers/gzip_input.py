"""Gzip content decompressed under an import's budget (``results.budget``): each chunk charged before it is
kept, so a bomb costs the cap and a few chunks, never its own size. A huge gzip CSV is decompressed as it is
read instead (``results.streaming.streamed``), each chunk charged to the same cap and passed on."""

import zlib
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from emuplan.results.budget import ImportBudget
from emuplan.results.canonical import ResultFileError

GZIP_MAGIC = b"\x1f\x8b"
GUNZIP_CHUNK_BYTES = 1024**2


def compressed_pieces(compressed: bytes | memoryview | BinaryIO) -> Iterable[bytes | memoryview]:
    """``compressed`` whole, or an open file a chunk at a time (the compressed upload never in memory)."""
    if isinstance(compressed, bytes | memoryview):
        return [compressed]
    return iter(lambda: compressed.read(GUNZIP_CHUNK_BYTES), b"")


def gunzip_chunks(pieces: Iterable[bytes | memoryview], file_name: str) -> Iterator[bytes]:
    """The decompressed content of the gzip members in ``pieces``, at most ``GUNZIP_CHUNK_BYTES`` a chunk (the
    caller charges each before it keeps it). ``ResultFileError`` for a stream that is not gzip or is cut off."""
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        for piece in pieces:
            pending = piece
            if decompressor.eof:
                # Concatenated gzip members are valid gzip: the next one starts with this piece.
                decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            while True:
                chunk = decompressor.decompress(pending, GUNZIP_CHUNK_BYTES)
                if chunk:
                    yield chunk
                if decompressor.eof:
                    pending = decompressor.unused_data
                    if not pending:
                        break
                    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
                    continue
                pending = decompressor.unconsumed_tail
                if not pending and not chunk:
                    break  # this piece is used up: on with the next
    except zlib.error as error:
        raise ResultFileError(f"{file_name}: not a valid gzip file ({error})") from error
    if not decompressor.eof:
        raise ResultFileError(f"{file_name}: the gzip stream is truncated")


def gunzip_capped(compressed: bytes | memoryview | BinaryIO, file_name: str, budget: ImportBudget) -> memoryview:
    """Decompress ``GUNZIP_CHUNK_BYTES`` at a time into one growing buffer, each chunk charged to ``budget``
    before it is kept, refusing as soon as it passes the cap: a gzip bomb costs the cap and a few chunks of
    memory, never its own size, and the content is held once (a list of parts joined at the end needed
    twice the cap). ``compressed`` may be an open file, read a chunk at a time, so that the compressed
    upload is never in memory at all."""
    content = bytearray()
    for chunk in gunzip_chunks(compressed_pieces(compressed), file_name):
        budget.decompressed(len(chunk), file_name)
        content += chunk
    return memoryview(content)
