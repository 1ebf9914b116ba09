"""One uploaded file as the text formats (``results.formats``) see it: its start, to recognise it, and its
whole content, to parse it."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from emuplan.json_input import is_overlong_number, overlong_number_at, overlong_number_message
from emuplan.results.budget import ImportBudget
from emuplan.results.canonical import ResultFileError

# What recognition looks at: a log's preamble, a trace's first keys.
HEAD_BYTES = 65536


def content_of(source: bytes | memoryview | Path) -> bytes | memoryview:
    """The bytes of a source: formats that are read whole, and the error paths that look for a line."""
    return source.read_bytes() if isinstance(source, Path) else source


@contextmanager
def numbers_named(source: bytes | memoryview | Path, file_name: str) -> Iterator[None]:
    """A number too long for Python to read, met anywhere while a file is parsed, refused naming the file, line
    and column: Python's own ``ValueError`` (422) named neither. Found only once it happened, so that a file
    parsed well is not scanned."""
    try:
        yield
    except ValueError as error:
        if not is_overlong_number(error):
            raise
        content = content_of(source)
        at = overlong_number_at(content)
        if at is None:
            raise ResultFileError(f"{file_name}: {overlong_number_message()}") from None
        before = bytes(memoryview(content)[:at])
        line, column = before.count(b"\n") + 1, at - (before.rfind(b"\n") + 1) + 1
        raise ResultFileError(f"{file_name}: line {line}, column {column}: {overlong_number_message()}") from None


@dataclass
class Upload:
    """``source``: the content (gunzipped), or the path of the file on disk holding it; ``head``: its first
    ``HEAD_BYTES``; ``collective``: the op the caller names (the file may name its own)."""

    source: bytes | memoryview | Path
    file_name: str
    head: bytes
    budget: ImportBudget
    collective: str | None = None

    @cached_property
    def text_head(self) -> str:
        return self.head.decode("utf-8", errors="replace")

    @property
    def size(self) -> int:
        return self.source.stat().st_size if isinstance(self.source, Path) else len(self.source)

    def content(self) -> bytes | memoryview:
        return content_of(self.source)

    def text(self) -> str:
        return bytes(self.content()).decode("utf-8", errors="replace")
