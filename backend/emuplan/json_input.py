"""``loads`` for JSON from outside (uploads, form fields, the sandbox's answer).

Python's parser recurses once per nesting level, so ``'{"a": ' * 100000`` raised RecursionError, which
no caller expected (a 500). Here it is one more malformed document: a ``json.JSONDecodeError``, which
every caller already turns into a message naming the file or field.
"""

import gc
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def loads(text: str | bytes | bytearray) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("objects or arrays nested too deeply", "", 0) from None


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
