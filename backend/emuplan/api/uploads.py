"""Uploads: the size limit enforced while the body streams in, and a multipart body parsed in memory.

Starlette spools multipart file parts to disk without a size cap, so the limit has to sit below the
form parser: this ASGI middleware counts the bytes of every request body and stops the request with
413 as soon as the count passes the limit, before the rest is read.
"""

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.types import ASGIApp, Message, Receive, Scope, Send


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


async def read_multipart_upload(request: Request) -> tuple[str, bytes | memoryview, dict[str, str]]:
    """The multipart body parsed in memory: (file name, file bytes, the other fields as text).

    Starlette's form parser spools file parts to disk past 1 MiB; a result file is parsed from memory
    right after, so writing it out and reading it back would only cost time (it doubled the import time
    of a 100 MB CSV). The body size is capped while it streams in (``BodySizeLimitMiddleware``).
    """
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    if content_type != b"multipart/form-data" or b"boundary" not in options:
        raise HTTPException(
            status_code=415, detail="Send the result file as multipart/form-data in a field named 'file'."
        )
    body = await request.body()
    parts: list[dict] = []
    header: dict[str, bytearray] = {}

    def on_part_begin() -> None:
        parts.append({"headers": {}, "spans": []})

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header.setdefault("field", bytearray()).extend(data[start:end])

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header.setdefault("value", bytearray()).extend(data[start:end])

    def on_header_end() -> None:
        parts[-1]["headers"][bytes(header.pop("field", b"")).lower()] = bytes(header.pop("value", b""))

    def on_part_data(data: bytes, start: int, end: int) -> None:
        # The parser hands out (buffer, start, end): keep the positions, copy nothing.
        parts[-1]["spans"].append((data, start, end))

    parser = MultipartParser(
        options[b"boundary"],
        {
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_part_data": on_part_data,
        },
    )
    try:
        parser.write(body)
        parser.finalize()
    except MultipartParseError as error:
        raise HTTPException(status_code=400, detail=f"Malformed multipart body: {error}") from None
    file_name, data, fields = None, None, {}
    for part in parts:
        _, disposition = parse_options_header(part["headers"].get(b"content-disposition", b""))
        field = disposition.get(b"name", b"").decode("utf-8", errors="replace")
        spans = part["spans"]
        if len(spans) == 1:
            buffer, start, end = spans[0]
            content = memoryview(buffer)[start:end]  # the file stays where the body already is
        else:
            content = b"".join(buffer[start:end] for buffer, start, end in spans)
        if field == "file":
            file_name = disposition.get(b"filename", b"upload").decode("utf-8", errors="replace") or "upload"
            data = content
        elif content:
            fields[field] = bytes(content).decode("utf-8", errors="replace")
    if data is None:
        raise HTTPException(status_code=422, detail="file: the upload has no part named 'file'")
    return file_name, data, fields
