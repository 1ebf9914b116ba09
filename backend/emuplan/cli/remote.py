"""The CLI against a remote emuplan (``--server URL`` / ``EMUPLAN_SERVER``) over its JSON API.

The API answers with the same documents the store functions give the local commands, so each command
prints them with the same formatting code. An API token (``--token`` / ``EMUPLAN_TOKEN``) is sent as
``Authorization: Bearer``. Any error answer is printed with the server's own message, exit status 2.
httpx2 and rich's progress bar are imported only when a command talks to a server.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from emuplan.cli.failure import fail

# Reading an answer may wait for the server to parse a large upload or plan an uploaded model.
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 600.0


def error_detail(answer: Any) -> str:
    """The ``detail`` of an error answer: our one message, or FastAPI's list of field errors joined."""
    detail = answer.get("detail") if isinstance(answer, dict) else None
    if isinstance(detail, list):
        return "; ".join(
            f"{'.'.join(str(part) for part in problem.get('loc', [])[1:])}: {problem.get('msg')}" for problem in detail
        )
    return str(detail) if detail is not None else str(answer)


class _CountingReader:
    """A file whose reads advance a progress bar; httpx2 reads the upload through it in 64 KiB chunks."""

    def __init__(self, file: IO[bytes], advance) -> None:
        self.file = file
        self.advance = advance

    def read(self, size: int = -1) -> bytes:
        chunk = self.file.read(size)
        self.advance(len(chunk))
        return chunk

    def fileno(self) -> int:  # lets httpx2 send Content-Length instead of a chunked body
        return self.file.fileno()


class Refused(Exception):
    """An error answer, raised instead of exiting when the caller goes on (one file of several refused)."""

    def __init__(self, message: str, answer: Any):
        super().__init__(message)
        self.answer = answer


@dataclass(frozen=True)
class RemoteServer:
    url: str
    token: str | None

    def _client(self):
        import httpx2

        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return httpx2.Client(
            base_url=self.url.rstrip("/"),
            headers=headers,
            timeout=httpx2.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
        )

    def _answer(self, send, *, raise_refusal: bool = False) -> Any:
        import httpx2

        try:
            with self._client() as client:
                response = send(client)
        except httpx2.HTTPError as error:
            fail(f"cannot reach {self.url}: {error}")
        if response.status_code == 204:
            return None
        try:
            answer = response.json()
        except ValueError:
            answer = {"detail": response.text.strip()[:500] or response.reason_phrase}
        if response.status_code >= 400:
            message = f"{error_detail(answer)} (HTTP {response.status_code} from {self.url})"
            if raise_refusal:
                raise Refused(message, answer)
            fail(message)
        return answer

    def get(self, path: str, params: dict | None = None) -> Any:
        return self._answer(lambda client: client.get(path, params=_without_none(params)))

    def post(self, path: str, body: dict) -> Any:
        return self._answer(lambda client: client.post(path, json=body))

    def patch(self, path: str, body: dict) -> Any:
        return self._answer(lambda client: client.patch(path, json=body))

    def delete(self, path: str) -> Any:
        return self._answer(lambda client: client.delete(path))

    def pages(self, path: str, params: dict, page_size: int) -> Iterator[dict]:
        """Every item of a list the API hands out ``limit`` at a time from ``offset``."""
        offset = 0
        while True:
            page = self.get(path, {**params, "limit": page_size, "offset": offset})
            yield from page
            if len(page) < page_size:
                return
            offset += page_size

    def upload(self, path: str, file: Path, fields: dict, *, raise_refusal: bool = False) -> Any:
        """POST ``file`` as multipart with ``fields``, a progress bar on stderr while the bytes go out; an error
        answer exits, or raises ``Refused`` with ``raise_refusal``."""
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        columns = (TextColumn("uploading {task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
        console = Console(stderr=True)
        # Drawn on a terminal only: piped or captured, stderr gets the error message and nothing else.
        progress = Progress(*columns, console=console, transient=True, disable=not console.is_terminal)
        with progress, file.open("rb") as stream:
            task = progress.add_task(file.name, total=file.stat().st_size)
            reader = _CountingReader(stream, lambda sent: progress.advance(task, sent))
            return self._answer(
                lambda client: client.post(path, files={"file": (file.name, reader)}, data=_without_none(fields)),
                raise_refusal=raise_refusal,
            )


def _without_none(values: dict | None) -> dict:
    return {key: value for key, value in (values or {}).items() if value is not None}
