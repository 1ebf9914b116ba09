"""Gzip content decompressed under an import's budget (``results.budget``): each chunk charged before it is
kept, so a bomb costs the cap and a few chunks, never its own size."""

import zlib
from typing import BinaryIO

from emuplan.results.budget import ImportBudget
from emuplan.results.canonical import ResultFileError

GZIP_MAGIC = b"\x1f\x8b"
GUNZIP_CHUNK_BYTES = 1024**2


def gunzip_capped(compressed: bytes | memoryview | BinaryIO, file_name: str, budget: ImportBudget) -> memoryview:
    """Decompress ``GUNZIP_CHUNK_BYTES`` at a time into one growing buffer, each chunk charged to ``budget``
    before it is kept, refusing as soon as it passes the cap: a gzip bomb costs the cap and a few chunks of
    memory, never its own size, and the content is held once (a list of parts joined at the end needed
    twice the cap). ``compressed`` may be an open file, read a chunk at a time, so that the compressed
    upload is never in memory at all."""
    max_bytes = budget.limits.max_decompressed_bytes - budget.decompressed_bytes
    if isinstance(compressed, bytes | memoryview):
        pieces = [compressed]
    else:
        pieces = iter(lambda: compressed.read(GUNZIP_CHUNK_BYTES), b"")
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    content = bytearray()
    try:
        for piece in pieces:
            pending = piece
            if decompressor.eof:
                # Concatenated gzip members are valid gzip: the next one starts with this piece.
                decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            while True:
                chunk = decompressor.decompress(pending, min(GUNZIP_CHUNK_BYTES, max_bytes + 1 - len(content)))
                budget.decompressed(len(chunk), file_name)
                content += chunk
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
    return memoryview(content)
