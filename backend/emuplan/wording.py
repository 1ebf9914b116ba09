"""Words the CLI, the pages and the exports share: counts with thousands separators ("12,345"), counts that
agree in number ("1 host", "4 hosts"), times to the minute."""

from datetime import datetime


def thousands(count: int) -> str:
    return f"{count:,}"


def plural(count: int, one: str, many: str | None = None) -> str:
    return f"{thousands(count)} {one if count == 1 else (many or one + 's')}"


def to_the_minute(moment: datetime) -> str:
    """As the pages show when a run, a comparison or a token was made (UTC, as stored): "2026-11-24 13:05"."""
    # %-formatting: 0.7 µs, against 2.3 for strftime on an aware time and 1.4 for an f-string (a list page
    # writes 50 of these).
    return "%04d-%02d-%02d %02d:%02d" % (moment.year, moment.month, moment.day, moment.hour, moment.minute)  # noqa: UP031
