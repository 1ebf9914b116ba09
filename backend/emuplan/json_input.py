"""``loads`` for JSON from outside (uploads, form fields, the sandbox's answer).

Python's parser recurses once per nesting level, so ``'{"a": ' * 100000`` raised RecursionError, which
no caller expected (a 500). Here it is one more malformed document: a ``json.JSONDecodeError``, which
every caller already turns into a message naming the file or field.
"""

import json
from typing import Any


def loads(text: str | bytes | bytearray) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("objects or arrays nested too deeply", "", 0) from None
