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


# Figures. One rule per kind of figure, the same on the pages (these functions are Jinja filters; util.js
# has their twins for the pages drawn in the browser) and in the CLI; JSON keeps full precision.
#
# - A cell nccl-tests printed (time in µs, algbw and busbw in GB/s): the text the log has, kept at import.
#   Without one (a -J report, a size timed several times), as nccl-tests prints a cell today (src/util.cu,
#   getFloatStr): two decimals if they fit the column's width — 7 characters for time, 6 for a bandwidth —,
#   else one, else none. No thousands separators: nccl-tests prints none. Its "# Avg bus bandwidth" line is
#   printed with %g (key avg_busbw_gbps).
# - A time we computed, in the unit its header names: µs to 0.1, ms to 0.01, s to 0.001.
# - A bandwidth we computed: GB/s to 0.01, as nccl-tests' cells.
# - A % of ideal: to 0.1; a ratio (to the baseline, to p50): 3 significant figures, never rounded to 0; a
#   rank's time against the median rank's, which sits near 1: to 0.001.
# - A Kolmogorov–Smirnov test: D to 0.0001, its p-value to 3 significant figures ('< 1e-300' for 0).
NCCL_TESTS_WIDTHS = {"time_us": 7, "algbw_gbps": 6, "busbw_gbps": 6}
TIME_DECIMALS = {"µs": 1, "ms": 2, "s": 3}
MISSING = "—"


def as_printed(value: float | None, printed: str | None = None, key: str = "busbw_gbps") -> str:
    """A nccl-tests figure as the log printed it (``key``: time_us, algbw_gbps, busbw_gbps, or avg_busbw_gbps for
    its "# Avg bus bandwidth" line)."""
    if printed:  # a template passes Jinja's Undefined for a cell the log did not print
        return printed
    if value is None:
        return MISSING
    if key == "avg_busbw_gbps":
        return f"{value:g}"
    width = NCCL_TESTS_WIDTHS[key]
    for decimals in (2, 1, 0):
        text = f"{value:.{decimals}f}"
        if len(text) <= width:
            return text
    return f"{value:.1e}" if width >= 7 else f"{value:.0e}"


def time_in(value_us: float | None, unit: str = "µs") -> str:
    """A computed time in ``unit`` (µs, ms or s), with thousands separators: '1,806.7', '1.81'; a difference
    that rounds to nothing is '0.00', never '-0.00'."""
    if value_us is None:
        return MISSING
    per_unit = {"µs": 1.0, "ms": 1e3, "s": 1e6}[unit]
    text = f"{value_us / per_unit:,.{TIME_DECIMALS[unit]}f}"
    return text.removeprefix("-") if text.strip("-0.,") == "" else text


def time_unit(typical_us: float) -> tuple[str, float]:
    """(unit, µs per unit) for times around ``typical_us``: µs below 1 ms, ms below 1 s, else s."""
    if typical_us >= 1e6:
        return "s", 1e6
    if typical_us >= 1e3:
        return "ms", 1e3
    return "µs", 1.0


def time_with_unit(value_us: float | None) -> str:
    """A time in its own unit, for a figure far from the unit of the times around it (an α-β ideal time of
    146.5 µs beside p50s in ms): '146.5 µs', '1.81 ms'."""
    if value_us is None:
        return MISSING
    unit, _ = time_unit(abs(value_us))
    return f"{time_in(value_us, unit)} {unit}"


def gbps(value: float | None) -> str:
    """A computed bandwidth in GB/s: '846.81'."""
    return MISSING if value is None else f"{value:,.2f}"


def percent(value: float | None) -> str:
    """A % of ideal (without the sign): '2,710.9'."""
    return MISSING if value is None else f"{value:,.1f}"


def change(value: float | None) -> str:
    """A change in % (from the previous run, from the median of a series), signed, to 0.1: '-12.0'."""
    return MISSING if value is None else f"{value:+,.1f}"


def ratio(value: float | None) -> str:
    """A ratio (run ÷ baseline, a trial ÷ p50) to 3 significant figures: '0.998', '0.000650', '350', never
    '0.00'; the caller adds the '×' where its header does not say it."""
    return MISSING if value is None else f"{value:#.3g}".rstrip(".")


def against_median(value: float | None) -> str:
    """A rank's (host's) summed time ÷ the median one's: '1.167', '0.995'."""
    return MISSING if value is None else f"{value:.3f}"


def ks_statistic(value: float) -> str:
    """The Kolmogorov–Smirnov D: '0.1234'."""
    return f"{value:.4f}"


def p_value(value: float) -> str:
    """A p-value: '0.0123', '4.56e-07', '< 1e-300' where it underflows to 0."""
    return "< 1e-300" if value == 0 else ratio(value)


def size_label(size_bytes: int) -> str:
    """A data size in the largest binary unit that keeps it whole or near it: 1073741824 -> "1 GiB"."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size_bytes >= 1 << shift:
            return f"{size_bytes / (1 << shift):g} {unit}"
    return f"{size_bytes} B"


def size_range(low: int | None, high: int | None) -> str:
    """A run's data sizes as lists show them, each to 3 significant figures: "8 B – 2 GiB", one size alone
    ("10 GiB"), "—" without sizes."""
    if low is None or high is None:
        return "—"

    def short(size_bytes: int) -> str:
        for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
            if size_bytes >= 1 << shift:
                return f"{size_bytes / (1 << shift):.3g} {unit}"
        return f"{size_bytes} B"

    return short(low) if low == high else f"{short(low)} – {short(high)}"


def parallel_degrees(inputs: dict) -> str:
    """Every parallel degree of a plan above 1, EP included ("DP 8 · EP 8", "TP 8 · PP 8 · DP 16"), or "1 GPU":
    what a list says of a plan beside its strategy, whose name alone ("data") hides a Mixtral's 8-way experts."""
    degrees = [f"{label} {inputs.get(key) or 1}" for label, key in (("TP", "tp"), ("PP", "pp"), ("DP", "dp"),
               ("EP", "ep")) if (inputs.get(key) or 1) > 1]  # fmt: skip
    return " · ".join(degrees) or "1 GPU"
