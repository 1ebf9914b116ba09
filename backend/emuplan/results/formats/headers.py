"""Reading column headers: which column plays which role, and in which unit.

Headers vary between tools and people (``Completion Time (ms)``, ``cct_ms``, ``time_us``, ``duration-ns``,
``Data Size``, ``bytes``, ``iter``, ``trial``). A header is folded to lower-case letters and digits (so
case, spaces, underscores, dashes, brackets and slashes do not matter), then matched against the
aliases of each role, optionally followed by a unit suffix (``ms``, ``us``, ``ns``, ``s``; ``b``,
``kib``, …).
"""

import json
from dataclasses import dataclass

from emuplan import json_input

# Role → folded aliases. Order inside a role does not matter; a header matches at most one role.
ROLE_ALIASES: dict[str, tuple[str, ...]] = {
    "iteration": ("iteration", "iter", "iters", "trial", "trials", "step", "iterationid", "trialid", "iterno"),
    "size": ("datasize", "size", "bytes", "sizebytes", "messagesize", "msgsize", "nbytes", "flowsize"),
    "collective": ("collective", "op", "operation", "collectiveop", "algorithm", "coll"),
    "duration": (
        "completiontime",
        "cct",
        "time",
        "duration",
        "latency",
        "elapsed",
        "elapsedtime",
        "runtime",
        "fct",
        "flowcompletiontime",
        "jct",
    ),
    "start": ("start", "starttime", "begin", "starttimestamp", "startts"),
    "end": ("end", "endtime", "finish", "finishtime", "stop", "endts"),
    "label": ("label", "name", "tag", "description", "desc"),
    "variant": ("variant", "placement"),
    "src": ("src", "srcrank", "source", "sourcerank", "sender", "srcip", "sip", "fromrank"),
    "dst": ("dst", "dstrank", "destination", "destinationrank", "receiver", "dstip", "dip", "torank"),
    "qp": ("qp", "qpn", "queuepair", "qpid", "qpnum"),
    "algbw": ("algbw", "algbandwidth", "algorithmbandwidth"),
    "busbw": ("busbw", "busbandwidth"),
    "ideal": ("ideal", "idealpercent", "idealpct", "percentofideal", "pctofideal"),
    "unit": ("unit", "units", "timeunit"),
}

TIME_ROLES = ("duration", "start", "end")
# Suffix → microseconds per unit. Longest suffixes are tried first.
TIME_UNITS_US: dict[str, float] = {
    "ns": 1e-3,
    "nsec": 1e-3,
    "nanoseconds": 1e-3,
    "us": 1.0,
    "usec": 1.0,
    "microseconds": 1.0,
    "ms": 1e3,
    "msec": 1e3,
    "milliseconds": 1e3,
    "s": 1e6,
    "sec": 1e6,
    "secs": 1e6,
    "seconds": 1e6,
}
SIZE_UNITS_BYTES: dict[str, int] = {
    "b": 1,
    "bytes": 1,
    "byte": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}
BANDWIDTH_UNITS = ("gbs", "gbps", "gbytess")
PERCENT_UNITS = ("percent", "pct")


def fold(header: str) -> str:
    """'Completion Time (ms)' → 'completiontimems'; 'µs' counts as 'us'."""
    return "".join(ch for ch in header.lower().replace("µ", "u").replace("μ", "u") if ch.isascii() and ch.isalnum())


@dataclass(frozen=True)
class ColumnRole:
    role: str
    scale: float | None  # unit factor: µs per unit for times, bytes per unit for sizes; None when not stated


def _units_for(role: str) -> dict[str, float]:
    if role in TIME_ROLES:
        return TIME_UNITS_US
    if role == "size":
        return SIZE_UNITS_BYTES
    if role in ("algbw", "busbw"):
        return dict.fromkeys(BANDWIDTH_UNITS, 1.0)
    if role == "ideal":
        return dict.fromkeys(PERCENT_UNITS, 1.0)
    return {}


def role_of(header: str) -> ColumnRole | None:
    """The role and unit a header names, or None when it matches no alias."""
    folded = fold(header)
    for role, aliases in ROLE_ALIASES.items():
        if folded in aliases:
            return ColumnRole(role, None)
    for role, aliases in ROLE_ALIASES.items():
        units = _units_for(role)
        for suffix in sorted(units, key=len, reverse=True):
            if folded.endswith(suffix) and folded[: -len(suffix)] in aliases:
                return ColumnRole(role, units[suffix])
    return None


def unit_scale_us(unit: str) -> float | None:
    """µs per unit for a unit written in a cell or a ``unit`` column ('ms', 'µs', 'sec'); None if unknown."""
    return TIME_UNITS_US.get(fold(unit))


@dataclass(frozen=True)
class MappedColumn:
    name: str  # the header as written in the file
    role: str
    scale: float | None


def map_columns(headers: list[str], column_map: dict[str, str] | None = None) -> dict[str, MappedColumn]:
    """Role → the column that plays it. ``column_map`` (role → header) overrides what the aliases find.

    A role claimed by two headers is ambiguous; the first one wins for every role except ``duration``,
    where the caller is told (see ``ambiguous_durations``) because choosing silently would change results.
    """
    mapped: dict[str, MappedColumn] = {}
    for header in headers:
        found = role_of(header)
        if found is not None and found.role not in mapped:
            mapped[found.role] = MappedColumn(header, found.role, found.scale)
    for role, header in (column_map or {}).items():
        if role not in ROLE_ALIASES:
            raise ValueError(f"column_map names an unknown role {role!r}; roles: {', '.join(ROLE_ALIASES)}")
        if header not in headers:
            raise ValueError(f"column_map maps {role!r} to {header!r}, which is not a column (columns: {headers})")
        found = role_of(header)
        units = _units_for(role)
        scale = found.scale if found is not None and found.role == role else _suffix_scale(fold(header), units)
        mapped[role] = MappedColumn(header, role, scale)
    return mapped


def ambiguous_durations(headers: list[str], column_map: dict[str, str] | None) -> list[str]:
    """Headers that all look like the duration column (only when the user did not pick one)."""
    if column_map and "duration" in column_map:
        return []
    return [h for h in headers if (found := role_of(h)) is not None and found.role == "duration"]


def _suffix_scale(folded: str, units: dict[str, float]) -> float | None:
    for suffix in sorted(units, key=len, reverse=True):
        if folded.endswith(suffix):
            return units[suffix]
    return None


def parse_column_map(text: str | None) -> dict[str, str] | None:
    """``{"duration": "wall clock"}`` as JSON, or ``duration=wall clock,size=payload``."""
    if not text or not text.strip():
        return None
    if text.lstrip().startswith("{"):
        try:
            mapping = json_input.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"column_map: not valid JSON ({error})") from None
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise ValueError("column_map: expected an object of role → column name")
        return mapping
    pairs = [part.split("=", 1) for part in text.split(",") if part.strip()]
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError("column_map: expected role=column pairs separated by commas, e.g. duration=wall_ms")
    return {role.strip(): column.strip() for role, column in pairs}
