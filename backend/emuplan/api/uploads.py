"""Uploads: the size limit enforced while the body streams in, and a multipart body streamed to disk.

Starlette spools multipart file parts to disk without a size cap, so the limit has to sit below the
form parser: this ASGI middleware counts the bytes of every request body and stops the request with
413 as soon as the count passes the limit, before the rest is read.
"""

import asyncio
import hashlib
import tempfile
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emuplan.results.budget import ImportBudget, ImportLimits


def _too_large_message(limit: int) -> str:
    return f"Upload is larger than the limit of {limit} bytes (EMUPLAN_MAX_UPLOAD_BYTES)."


class UploadTooLarge(HTTPException):
    """An HTTPException so that FastAPI's body parsing passes it through instead of turning it into 400."""

    def __init__(self, limit: int):
        super().__init__(status_code=413, detail=_too_large_message(limit))


class BodySizeLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            response = JSONResponse(status_code=413, content={"detail": _too_large_message(self.max_bytes)})
            await response(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise UploadTooLarge(self.max_bytes)
            return message

        await self.app(scope, counting_receive, send)


# Form fields beside the file (name, tags, a column mapping) are short text held in memory.
MAX_FIELD_BYTES = 64 * 1024
WRITES_IN_FLIGHT = 8


@dataclass
class SpooledUpload:
    """The multipart body as it streamed in: the file part on disk, hashed on the way, and the other
    fields as text."""

    file_name: str
    path: Path
    sha256: str
    fields: dict[str, str]


@asynccontextmanager
async def spooled_multipart_upload(request: Request) -> AsyncIterator[SpooledUpload]:
    """Stream the multipart body through python-multipart's parser, writing the part named ``file`` to a
    temporary file (deleted on exit) and hashing it as it goes.

    Memory stays a chunk of the body whatever the upload's size (holding the body and then its file part
    in memory made a 600 MB CSV cost its size twice before parsing began); the parser reads the file from
    disk. The body size is capped while it streams in (``BodySizeLimitMiddleware``).
    """
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    if content_type != b"multipart/form-data" or b"boundary" not in options:
        raise HTTPException(
            status_code=415, detail="Send the result file as multipart/form-data in a field named 'file'."
        )
    with tempfile.TemporaryDirectory(prefix="emuplan-upload-") as directory:
        path = Path(directory) / "upload"
        with path.open("wb") as spool:
            file_name, digest, fields = await _stream_parts(request, options[b"boundary"], spool)
        yield SpooledUpload(file_name=file_name, path=path, sha256=digest, fields=fields)


async def _stream_parts(request: Request, boundary: bytes, spool: BinaryIO) -> tuple[str, str, dict[str, str]]:
    """(file name, SHA-256 of the file part, the other fields as text); the file part goes to ``spool``."""
    hasher = hashlib.sha256()
    headers: dict[bytes, bytes] = {}
    header: dict[str, bytearray] = {}
    current = {"field": "", "text": bytearray()}
    file_name: str | None = None
    fields: dict[str, str] = {}

    def on_part_begin() -> None:
        headers.clear()

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header.setdefault("field", bytearray()).extend(data[start:end])

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header.setdefault("value", bytearray()).extend(data[start:end])

    def on_header_end() -> None:
        headers[bytes(header.pop("field", b"")).lower()] = bytes(header.pop("value", b""))

    def on_headers_finished() -> None:
        nonlocal file_name
        _, disposition = parse_options_header(headers.get(b"content-disposition", b""))
        field = disposition.get(b"name", b"").decode("utf-8", errors="replace")
        if field == "file":
            if file_name is not None:
                raise HTTPException(status_code=422, detail="file: the upload has more than one part named 'file'")
            file_name = disposition.get(b"filename", b"upload").decode("utf-8", errors="replace") or "upload"
        current["field"], current["text"] = field, bytearray()

    def on_part_data(data: bytes, start: int, end: int) -> None:
        # A view into the received chunk (immutable bytes); the parser's own look-behind buffer is reused.
        piece = memoryview(data)[start:end] if isinstance(data, bytes) else data[start:end]
        if current["field"] == "file":
            received.append(piece)
            return
        current["text"] += piece
        if len(current["text"]) > MAX_FIELD_BYTES:
            raise HTTPException(
                status_code=422, detail=f"{current['field']}: longer than {MAX_FIELD_BYTES} bytes for a form field"
            )

    def on_part_end() -> None:
        if current["field"] != "file" and current["text"]:
            fields[current["field"]] = current["text"].decode("utf-8", errors="replace")

    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_headers_finished": on_headers_finished,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )

    def write_and_hash(pieces: list) -> None:
        for piece in pieces:
            spool.write(piece)
            hasher.update(piece)

    # Writing and hashing (both release the GIL) run on a second thread while the loop receives the next
    # chunks; at most WRITES_IN_FLIGHT batches wait, so memory stays a few chunks.
    received: list = []
    in_flight: deque[asyncio.Future] = deque()
    with ThreadPoolExecutor(max_workers=1) as writer:
        try:
            async for chunk in request.stream():
                parser.write(chunk)
                if received:
                    in_flight.append(asyncio.wrap_future(writer.submit(write_and_hash, received)))
                    received = []
                    if len(in_flight) > WRITES_IN_FLIGHT:
                        await in_flight.popleft()
            parser.finalize()
        except MultipartParseError as error:
            raise HTTPException(status_code=400, detail=f"Malformed multipart body: {error}") from None
        finally:
            for write in in_flight:
                await write
    if file_name is None:
        raise HTTPException(status_code=422, detail="file: the upload has no part named 'file'")
    return file_name, hasher.hexdigest(), fields


@contextmanager
def admitted_import(request: Request, settings) -> Iterator[ImportBudget]:
    """The import's memory account (``results.budget``), admitted before the body is read: it reserves the
    declared body size in the pool every import shares (a CSV becomes a table about its size), so that an
    upload that cannot fit beside the imports in flight is refused at once (503 with Retry-After) instead
    of after spooling. Released when the import has answered, whatever the outcome."""
    declared = request.headers.get("content-length", "")
    with ImportBudget(ImportLimits.from_settings(settings)) as budget:
        budget.admit(budget.limits.upload_floor(int(declared) if declared.isdigit() else 0))
        yield budget
