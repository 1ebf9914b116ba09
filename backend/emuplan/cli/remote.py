"""The CLI against a remote emuplan (``--server URL`` / ``EMUPLAN_SERVER``) over its JSON API.

The API answers with the same documents the store functions give the local commands, so each command
prints them with the same formatting code. An API token (``--token`` / ``EMUPLAN_TOKEN``) is sent as
``Authorization: Bearer``. Any error answer is printed with the server's own message, exit status 2.
httpx2 and rich's progress bar are imported only when a command talks to a server. Uploads stream each file from
disk and show their progress (bytes sent of the total, rate) on stderr: on a terminal, or anywhere with
``--progress``.
"""

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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
    """A file whose reads advance the upload's progress; httpx2 reads the upload through it in 64 KiB chunks, so
    the file is streamed, never read whole."""

    def __init__(self, file: IO[bytes], advance) -> None:
        self.file = file
        self.advance = advance

    def read(self, size: int = -1) -> bytes:
        chunk = self.file.read(size)
        self.advance(len(chunk))
        return chunk

    def fileno(self) -> int:  # lets httpx2 send Content-Length instead of a chunked body
        return self.file.fileno()


class _ProgressLines:
    """The upload's progress as a line on stderr at most every ``every_s`` seconds and when the last byte is
    read: for --progress where stderr is no terminal (a CI log), which rich's bar does not draw on."""

    def __init__(self, what: str, total: int, every_s: float = 1.0) -> None:
        self.what, self.total, self.every_s = what, total, every_s
        self.sent = 0
        self.started = self.printed = time.monotonic()

    def advance(self, nbytes: int) -> None:
        self.sent += nbytes
        now = time.monotonic()
        if now - self.printed >= self.every_s or (nbytes and self.sent == self.total):
            self.printed = now
            rate = self.sent / max(now - self.started, 1e-9)
            print(
                f"uploading {self.what}: {self.sent / 1e6:.1f} of {self.total / 1e6:.1f} MB "
                f"({100 * self.sent // max(self.total, 1)} %), {rate / 1e6:.1f} MB/s",
                file=sys.stderr,
                flush=True,
            )


@contextmanager
def _upload_progress(what: str, total: int, forced: bool) -> Iterator[Callable[[int], None]]:
    """What advances the upload's progress: rich's bar with the rate on a terminal (erased when done), lines
    with ``forced`` elsewhere, nothing otherwise (a script's stderr gets the error message and nothing else)."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        yield _ProgressLines(what, total).advance if forced else lambda nbytes: None
        return
    columns = (TextColumn("uploading {task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(what, total=total)
        yield lambda nbytes: progress.advance(task, nbytes)


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
        answer = _json_answer(response)
        if response.status_code >= 400:
            message = self._refusal(response, answer)
            if raise_refusal:
                raise Refused(message, answer)
            fail(message)
        return answer

    def _refusal(self, response, answer: Any) -> str:
        return f"{error_detail(answer)} (HTTP {response.status_code} from {self.url})"

    def download(self, path: str, params: dict, destination: Path) -> None:
        """GET ``path`` into ``destination`` as the body arrives, never whole in memory; an error answer exits."""
        import httpx2

        try:
            with self._client() as client, client.stream("GET", path, params=_without_none(params)) as response:
                if response.status_code >= 400:
                    response.read()
                    fail(self._refusal(response, _json_answer(response)))
                with destination.open("wb") as file:
                    for chunk in response.iter_bytes():
                        file.write(chunk)
        except httpx2.HTTPError as error:
            destination.unlink(missing_ok=True)  # a body cut short is no download
            fail(f"cannot reach {self.url}: {error}")

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

    def upload(
        self, path: str, files: list[Path], fields: dict, *, raise_refusal: bool = False, progress: bool = False
    ) -> Any:
        """POST ``files`` as the parts named ``file`` of one multipart body with ``fields``, each streamed from
        disk, their progress on stderr (``_upload_progress``; ``progress``: also off a terminal); an error
        answer exits, or raises ``Refused`` with ``raise_refusal``."""
        what = files[0].name if len(files) == 1 else f"{len(files)} files"
        total = sum(file.stat().st_size for file in files)
        with _upload_progress(what, total, progress) as advance, ExitStack() as opened:
            parts = [
                ("file", (file.name, _CountingReader(opened.enter_context(file.open("rb")), advance))) for file in files
            ]
            return self._answer(
                lambda client: client.post(path, files=parts, data=_without_none(fields)), raise_refusal=raise_refusal
            )


def _json_answer(response) -> Any:
    """The answer's JSON, or its text as an error ``detail`` (a proxy's HTML page, say)."""
    try:
        return response.json()
    except ValueError:
        return {"detail": response.text.strip()[:500] or response.reason_phrase}


def _without_none(values: dict | None) -> dict:
    return {key: value for key, value in (values or {}).items() if value is not None}
