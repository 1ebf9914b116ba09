"""The base of every error that answers an HTTP request with its own status: ``EmuplanError``.

Domain and store modules raise their errors without knowing of any web framework; each says here, on the
class, which status it answers with (``http_status``) and, through two attributes it may carry, which headers:
``retry_after_s`` (a busy server: try again then) becomes ``Retry-After``, ``location`` (the running job a
second one clashes with) becomes ``Location``. ``api/errors.py`` turns any of them into a response without
naming one. An error keeps its own base (``ValueError`` for bad input, ``LookupError`` for a missing row)
beside this one, so ``except ValueError`` still catches what it caught.
"""

from typing import ClassVar


class EmuplanError(Exception):
    # No default: an error that forgets its status fails loudly (a 500) instead of answering a wrong one.
    http_status: ClassVar[int]
    retry_after_s: int | None = None
    location: str | None = None

    @property
    def http_headers(self) -> dict[str, str]:
        headers = {}
        if self.retry_after_s is not None:
            headers["Retry-After"] = str(self.retry_after_s)
        if self.location is not None:
            headers["Location"] = self.location
        return headers

    @property
    def http_extra(self) -> dict[str, object]:
        """Fields the JSON answer carries beside ``detail``."""
        return {}
