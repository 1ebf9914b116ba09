"""Uploads: the size limit enforced while the body streams in, and a multipart body streamed to disk.

Starlette spools multipart file parts to disk without a size cap, so the limit has to sit below the
form parser: this ASGI middleware counts the bytes of every request body and stops the request with
413 as soon as the count passes the limit, before the rest is read.
"""

import asyncio
import hashlib
import io
import tempfile
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emuplan.results.parse import stream_csv_table


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


class GrowingFile(io.RawIOBase):
    """The file part read back from the spool while it is still being written: a read waits until the
    bytes it asks for are on disk or the part is complete; once the upload stops (a bad body, a limit, the
    reader no longer wanted) every read raises ``OSError``."""

    def __init__(self, path: Path):
        super().__init__()
        self._file = path.open("rb", buffering=0)
        self._written = 0
        self._complete = False
        self._stopped = False
        self._changed = threading.Condition()

    def grew(self, written: int) -> None:
        with self._changed:
            self._written = written
            self._changed.notify_all()

    def complete(self) -> None:
        with self._changed:
            self._complete = True
            self._changed.notify_all()

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer) -> int:
        wanted = self._file.tell() + len(buffer)
        with self._changed:
            self._changed.wait_for(lambda: self._stopped or self._complete or self._written >= wanted)
            if self._stopped:
                raise OSError("the upload stopped before the file part was complete")
            available = self._written
        return self._file.readinto(memoryview(buffer)[: max(0, available - self._file.tell())])

    def close(self) -> None:
        self._file.close()
        super().close()


@dataclass
class SpooledUpload:
    """The multipart body as it streamed in: the file part on disk, hashed on the way, the other fields
    as text, and the file read as a CSV table while it arrived (``results.parse.stream_csv_table``)."""

    file_name: str
    path: Path
    sha256: str
    fields: dict[str, str]
    streamed_table: Future | None

    def take_csv_table(self) -> pa.Table | None:
        """The streamed table (waiting for the read to finish), handed over once: the caller holds the
        only reference and frees it as soon as it has its columns."""
        future, self.streamed_table = self.streamed_table, None
        return future.result() if future is not None else None


@asynccontextmanager
async def spooled_multipart_upload(request: Request) -> AsyncIterator[SpooledUpload]:
    """Stream the multipart body through python-multipart's parser, writing the part named ``file`` to a
    temporary file (deleted on exit) and hashing it as it goes.

    Memory stays a chunk of the body whatever the upload's size (holding the body and then its file part
    in memory made a 600 MB CSV cost its size twice before parsing began); the parser reads the file from
    disk. The body size is capped while it streams in (``BodySizeLimitMiddleware``).

    A third thread reads the file part back as a CSV table while it arrives, so that parsing overlaps
    receiving; the upload hands it over (``take_csv_table``), and the thread has ended before this exits.
    """
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    if content_type != b"multipart/form-data" or b"boundary" not in options:
        raise HTTPException(
            status_code=415, detail="Send the result file as multipart/form-data in a field named 'file'."
        )
    with tempfile.TemporaryDirectory(prefix="emuplan-upload-") as directory:
        path = Path(directory) / "upload"
        with path.open("wb") as spool, GrowingFile(path) as growing, ThreadPoolExecutor(max_workers=1) as reader:
            streamed: list[Future] = []

            def start_reading() -> None:
                streamed.append(reader.submit(stream_csv_table, growing))

            upload = None
            try:
                file_name, digest, fields = await _stream_parts(
                    request, options[b"boundary"], spool, growing, start_reading
                )
                # The upload holds the only reference to the read, so that its table is freed once taken.
                upload = SpooledUpload(file_name, path, digest, fields, streamed.pop() if streamed else None)
                yield upload
            finally:
                # A read whose table was not taken (the body failed, the file is no CSV) has no use: stop
                # it, and let it end without holding up the event loop.
                growing.stop()
                if upload is not None and upload.streamed_table is not None:
                    streamed.append(upload.streamed_table)
                for future in streamed:
                    await asyncio.wrap_future(future)


async def _stream_parts(
    request: Request, boundary: bytes, spool: BinaryIO, growing: GrowingFile, start_reading: Callable[[], None]
) -> tuple[str, str, dict[str, str]]:
    """(file name, SHA-256 of the file part, the other fields as text); the file part goes to ``spool``,
    ``growing`` hears of every byte of it on disk, and ``start_reading`` is called as it begins."""
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
            start_reading()
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
        spool.flush()
        growing.grew(spool.tell())

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
            in_flight.append(asyncio.wrap_future(writer.submit(growing.complete)))
        except MultipartParseError as error:
            raise HTTPException(status_code=400, detail=f"Malformed multipart body: {error}") from None
        finally:
            for write in in_flight:
                await write
    if file_name is None:
        raise HTTPException(status_code=422, detail="file: the upload has no part named 'file'")
    return file_name, hasher.hexdigest(), fields
