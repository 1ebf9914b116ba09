"""Uploads: the size limit enforced while the body streams in, a multipart body of one or many files streamed
to disk (a body cut short leaves nothing behind), and whether several files are one training job's records.

Starlette spools multipart file parts to disk without a size cap, so the limit has to sit below the
form parser: this ASGI middleware counts the bytes of every request body and stops the request with
413 as soon as the count passes the limit, before the rest is read. Only a multipart body carries files;
any other (JSON, a sign-in form) is read whole and parsed into Python objects at up to 50 times its size
(21 MB of JSON took the server 1.05 GB above its start), so it gets ``MAX_OTHER_BODY_BYTES``.
"""

import asyncio
import gzip
import hashlib
import tempfile
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.containers.gzip_input import GZIP_MAGIC
from emuplan.results.formats import observed
from emuplan.results.formats.observed import OBSERVED_FORMATS

# The largest JSON a route takes is a run's edit: its note and facts, well under this.
MAX_OTHER_BODY_BYTES = 1024**2


def _too_large_message(limit: int, multipart: bool) -> str:
    if multipart:
        return f"Upload is larger than the limit of {limit} bytes (EMUPLAN_MAX_UPLOAD_BYTES)."
    return f"The request body is larger than the {limit} bytes a request without files may send."


class UploadTooLarge(HTTPException):
    """An HTTPException so that FastAPI's body parsing passes it through instead of turning it into 400."""

    def __init__(self, limit: int, multipart: bool):
        super().__init__(status_code=413, detail=_too_large_message(limit, multipart))


class BodySizeLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        multipart = headers.get(b"content-type", b"").lower().startswith(b"multipart/form-data")
        limit = self.max_bytes if multipart else min(self.max_bytes, MAX_OTHER_BODY_BYTES)
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            response = JSONResponse(status_code=413, content={"detail": _too_large_message(limit, multipart)})
            await response(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise UploadTooLarge(limit, multipart)
            return message

        await self.app(scope, counting_receive, send)


# Form fields beside the files (name, tags, a column mapping) are short text held in memory.
MAX_FIELD_BYTES = 64 * 1024
# Files in one upload: an NCCL Inspector dump of a 4,096-rank job is one file per process.
MAX_FILES = 4096
# A file name, as the file system under the spool holds it.
MAX_NAME_BYTES = 255
WRITES_IN_FLIGHT = 8


@dataclass
class SpooledFile:
    """One file part of the body on disk, under the last component of the name the client gave it (the
    observed import reads each file's name from its path), hashed as it streamed in."""

    file_name: str
    path: Path
    sha256: str
    size: int


@dataclass
class SpooledUpload:
    """The multipart body as it streamed in: every part named ``file`` on disk, in the body's order, and the
    other fields as text."""

    files: list[SpooledFile]
    fields: dict[str, str]


class _PartOnDisk:
    """A file part being written and hashed (on the writer thread, in the order its pieces arrived)."""

    def __init__(self, file_name: str, path: Path):
        self.file_name = file_name
        self.path = path
        self.file = path.open("wb")
        self.hasher = hashlib.sha256()
        self.size = 0

    def write(self, piece) -> None:
        self.file.write(piece)
        self.hasher.update(piece)
        self.size += len(piece)

    def spooled(self) -> SpooledFile:
        return SpooledFile(self.file_name, self.path, self.hasher.hexdigest(), self.size)


def _spool_name(given: bytes) -> str:
    """The last path component of the client's file name ("upload" when it has none): browsers send the bare
    name, but any client may send a path."""
    name = given.decode("utf-8", errors="replace").replace("\\", "/").rsplit("/", 1)[-1].replace("\0", "")
    name = "upload" if name in ("", ".", "..") else name
    if len(name.encode()) > MAX_NAME_BYTES:
        raise HTTPException(
            status_code=422, detail=f"file: the file name {name[:40]!r}… is longer than {MAX_NAME_BYTES} bytes"
        )
    return name


@asynccontextmanager
async def spooled_multipart_upload(request: Request) -> AsyncIterator[SpooledUpload]:
    """Stream the multipart body through python-multipart's parser, writing each part named ``file`` to a
    temporary file of its own (all deleted on exit, whatever happens) and hashing it as it goes.

    Memory stays a chunk of the body whatever the upload's size (holding the body and then its file part
    in memory made a 600 MB CSV cost its size twice before parsing began); the parser reads the files from
    disk. The body size is capped while it streams in (``BodySizeLimitMiddleware``). A body cut short (the
    client went away, or the closing boundary never came) is refused before anything reads the files.
    """
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    if content_type != b"multipart/form-data" or b"boundary" not in options:
        raise HTTPException(
            status_code=415, detail="Send the result files as multipart/form-data in fields named 'file'."
        )
    with tempfile.TemporaryDirectory(prefix="emuplan-upload-") as directory:
        yield await _stream_parts(request, options[b"boundary"], Path(directory))


async def _stream_parts(request: Request, boundary: bytes, directory: Path) -> SpooledUpload:
    """The body's file parts spooled under ``directory`` (one sub-directory each: two parts may have one name)
    and its other fields as text."""
    headers: dict[bytes, bytes] = {}
    header: dict[str, bytearray] = {}
    current: dict = {"field": "", "text": bytearray(), "part": None}
    parts: list[_PartOnDisk] = []
    fields: dict[str, str] = {}
    ended = False
    # Pieces of file parts waiting for the writer thread, each with the part it belongs to.
    received: list[tuple[_PartOnDisk, memoryview | bytes]] = []
    in_flight: deque[asyncio.Future] = deque()
    writer = ThreadPoolExecutor(max_workers=1)

    def submit(action, *arguments) -> None:
        in_flight.append(asyncio.wrap_future(writer.submit(action, *arguments)))

    def write_pieces(pieces: list) -> None:
        for part, piece in pieces:
            part.write(piece)

    def hand_over_received() -> None:
        nonlocal received
        if received:
            submit(write_pieces, received)
            received = []

    def on_part_begin() -> None:
        headers.clear()

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header.setdefault("field", bytearray()).extend(data[start:end])

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header.setdefault("value", bytearray()).extend(data[start:end])

    def on_header_end() -> None:
        headers[bytes(header.pop("field", b"")).lower()] = bytes(header.pop("value", b""))

    def on_headers_finished() -> None:
        _, disposition = parse_options_header(headers.get(b"content-disposition", b""))
        field = disposition.get(b"name", b"").decode("utf-8", errors="replace")
        current["field"], current["text"], current["part"] = field, bytearray(), None
        if field == "file":
            if len(parts) == MAX_FILES:
                raise HTTPException(status_code=422, detail=f"file: more than {MAX_FILES} files in one upload")
            name = _spool_name(disposition.get(b"filename", b"upload"))
            (directory / str(len(parts))).mkdir()
            current["part"] = _PartOnDisk(name, directory / str(len(parts)) / name)
            parts.append(current["part"])

    def on_part_data(data: bytes, start: int, end: int) -> None:
        # A view into the received chunk (immutable bytes); the parser's own look-behind buffer is reused.
        piece = memoryview(data)[start:end] if isinstance(data, bytes) else data[start:end]
        if current["part"] is not None:
            received.append((current["part"], piece))
            return
        current["text"] += piece
        if len(current["text"]) > MAX_FIELD_BYTES:
            raise HTTPException(
                status_code=422, detail=f"{current['field']}: longer than {MAX_FIELD_BYTES} bytes for a form field"
            )

    def on_part_end() -> None:
        if current["part"] is not None:
            # Its last pieces, then its file closed: one file open at a time whatever the number of parts.
            hand_over_received()
            submit(current["part"].file.close)
        elif current["text"]:
            fields[current["field"]] = current["text"].decode("utf-8", errors="replace")

    def on_end() -> None:
        nonlocal ended
        ended = True

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
            "on_end": on_end,
        },
    )
    # Writing and hashing (both release the GIL) run on a second thread while the loop receives the next
    # chunks; at most WRITES_IN_FLIGHT batches wait, so memory stays a few chunks.
    try:
        async for chunk in request.stream():
            parser.write(chunk)
            hand_over_received()
            while len(in_flight) > WRITES_IN_FLIGHT:
                await in_flight.popleft()
        parser.finalize()
    except MultipartParseError as error:
        raise HTTPException(status_code=400, detail=f"Malformed multipart body: {error}") from None
    except ClientDisconnect:
        # Nobody reads this answer; it ends the request quietly (not as a 500) with the spool deleted.
        raise HTTPException(status_code=400, detail=_cut_short(parts, "the client closed the connection")) from None
    finally:
        for write in in_flight:
            await write
        for part in parts:
            part.file.close()
        writer.shutdown()
    if not ended:
        raise HTTPException(status_code=400, detail=_cut_short(parts, "the body ended before its closing boundary"))
    if not parts:
        raise HTTPException(status_code=422, detail="file: the upload has no part named 'file'")
    return SpooledUpload(files=[part.spooled() for part in parts], fields=fields)


def _cut_short(parts: list[_PartOnDisk], how: str) -> str:
    where = f"while {parts[-1].file_name} was arriving" if parts else "before any file arrived"
    return f"The upload was cut short {where} ({how}): nothing was imported."


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


# What format detection reads of a file (``results.parse``).
HEAD_BYTES = 65536


def one_job(files: list[SpooledFile], job: bool | None, fmt: str | None) -> bool:
    """Whether several files are one training job's records, to import as one observed run: ``job`` when the
    client said; else whether ``fmt`` is an observed format; else whether every file looks like one (or an
    archive of them), gunzipped first."""
    if job is not None:
        return job
    if fmt is not None:
        return fmt in OBSERVED_FORMATS
    return all(observed.recognises(_head(file.path)) for file in files)


def _head(path: Path) -> bytes:
    with path.open("rb") as file:
        head = file.read(HEAD_BYTES)
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path) as file:
                return file.read(HEAD_BYTES)
        except (OSError, EOFError):  # not gzip after all: its own import says what is wrong
            return b""
    return head
