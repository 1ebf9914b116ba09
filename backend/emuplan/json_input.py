"""``loads`` for JSON from outside (uploads, form fields, the sandbox's answer).

Python's parser recurses once per nesting level, so ``'{"a": ' * 100000`` raised RecursionError, which
no caller expected (a 500). Here it is one more malformed document: a ``json.JSONDecodeError``, which
every caller already turns into a message naming the file or field. So is an integer of more digits than
Python reads (``sys.get_int_max_str_digits()``, 4,300): its own ``ValueError`` named neither file nor place.
"""

import gc
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The digits of a run are mapped to "0" and the run found as a substring, a chunk at a time: a regular
# expression took 47 ns a byte of an Inspector dump (and ~quadratic time on runs just short of the limit), this 2.
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_SCAN_CHUNK = 4 * 1024**2


def loads(text: str | bytes | bytearray) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("objects or arrays nested too deeply", "", 0) from None
    except ValueError as error:
        if not is_overlong_number(error):
            raise
        data = text.encode() if isinstance(text, str) else text
        at = overlong_number_at(data) or 0
        doc = text if isinstance(text, str) else bytes(text).decode("utf-8", errors="replace")
        position = len(bytes(data[:at]).decode("utf-8", errors="replace"))
        raise json.JSONDecodeError(overlong_number_message(), doc, position) from None


def is_overlong_number(error: ValueError) -> bool:
    """Whether ``error`` is Python refusing to read an integer of more than ``sys.get_int_max_str_digits()``
    digits: a plain ``ValueError`` whose message names no file, raised by ``int()`` anywhere in a parser."""
    return type(error) is ValueError and str(error).startswith("Exceeds the limit (")


def overlong_number_message() -> str:
    return f"a number of more than {sys.get_int_max_str_digits()} digits"


def overlong_number_at(data: bytes | bytearray | memoryview) -> int | None:
    """Where the first run of more digits than Python reads as an integer starts in ``data``; None if none."""
    limit = sys.get_int_max_str_digits()
    if not limit:
        return None
    run = b"0" * (limit + 1)
    view = memoryview(data).cast("B")
    # Each chunk reaches ``limit`` bytes into the next: a run that starts in it is found whole in it.
    for start in range(0, len(view), _SCAN_CHUNK):
        found = bytes(view[start : start + _SCAN_CHUNK + limit]).translate(_DIGITS_AS_ZERO).find(run)
        if found >= 0:
            return start + found
    return None


_pauses = 0
_pauses_lock = threading.Lock()
_was_enabled = False


@contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a large document is parsed and read. A parsed JSON document is a
    tree, with no cycle to find, yet every full collection rescans each of its objects made so far: ``json.loads``
    of a profiler trace and one pass over its events took 2.6–3.1 µs an event at 10 k events, 5.2–6.2 at 100 k and
    7.1–8.4 at 1 M; paused, 2.1–2.2, 2.2–3.0 and 2.4–2.9 (a loaded machine). Process-wide, so nested and
    concurrent pauses are counted and the last to end turns it back on (unless it was off before the first);
    garbage without cycles is freed meanwhile as always."""
    global _pauses, _was_enabled
    with _pauses_lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pauses_lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
