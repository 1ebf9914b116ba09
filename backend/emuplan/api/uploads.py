"""Upload size limits enforced while the body streams in.

Starlette spools multipart file parts to disk without a size cap, so the limit has to sit below the
form parser: this ASGI middleware counts the bytes of every request body and stops the request with
413 as soon as the count passes the limit, before the rest is read.
"""

from fastapi import HTTPException
from fastapi.responses import JSONResponse
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
