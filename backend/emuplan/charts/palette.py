"""Every colour the charts use, in one place (the pages draw the figures the server builds and colour nothing
themselves: frontend/static/charts.js passes the figures' colours to Plotly as they come).

A colour means one thing on a page. Runs take the qualitative ``RUN_COLORS`` by their place in the page's
runs, the same in every chart of the page; past its 24 colours they come round with another dash, so no two
runs a page shows look alike. Data sizes take a sequential scale (``size_colors``: dark for the smallest,
light for the largest), so a size never wears a run's colour and neighbouring sizes look related; groups of
one size told apart by collective and variant get a dash each. A run page's collectives are its series:
they take the run colours in order (one run, so no run colour is taken)."""

from collections.abc import Iterable

# Plotly's Dark24: 24 qualitative colours that stay apart on white.
RUN_COLORS = (
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86", "#EB663B", "#511CFB",
    "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE", "#862A16", "#A777F1", "#620042", "#1616A7",
    "#DA60CA", "#6C4516", "#0D2A63", "#AF0038",
)  # fmt: skip
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# Viridis (Plotly's sequential scale) from its dark end to short of its pale yellow, which fades on white.
SIZE_SCALE = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b")
UNKNOWN_SIZE_COLOR = "#7f7f7f"
# Marks that are not series: a straggler's bar against the others, trials clipped off the axis, reference lines.
ALERT_COLOR = "#d62728"
TYPICAL_COLOR = "#9db4d0"
REFERENCE_COLOR = "#444444"
# A step's collectives (bars stacked by kind on a comparison whose runs already wear RUN_COLORS): greys and a
# pattern each, so a kind is never read as a run.
KIND_COLORS = ("#4d4d4d", "#8c8c8c", "#b3b3b3", "#d9d9d9")
KIND_PATTERNS = ("", "/", ".", "x", "-", "|", "+", "\\")


def run_style(index: int) -> dict:
    """The line of the page's ``index``-th run (0-based): its colour, and past the palette a dash of its own."""
    return {"color": RUN_COLORS[index % len(RUN_COLORS)], "dash": DASHES[index // len(RUN_COLORS) % len(DASHES)]}


def _mixed(low: str, high: str, share: float) -> str:
    channels = [round(int(low[i : i + 2], 16) * (1 - share) + int(high[i : i + 2], 16) * share) for i in (1, 3, 5)]
    return "#" + "".join(f"{channel:02x}" for channel in channels)


def size_colors(sizes: Iterable[int | None]) -> dict[int | None, str]:
    """Each distinct size's colour along ``SIZE_SCALE``, evenly by rank from the smallest to the largest (so any
    number of sizes stays apart); a group of unknown size is grey."""
    distinct = sorted({size for size in sizes if size is not None})
    colors: dict[int | None, str] = {None: UNKNOWN_SIZE_COLOR}
    steps = len(SIZE_SCALE) - 1
    for rank, size in enumerate(distinct):
        position = rank / (len(distinct) - 1) * steps if len(distinct) > 1 else 0.0
        low = min(int(position), steps - 1)
        colors[size] = _mixed(SIZE_SCALE[low], SIZE_SCALE[low + 1], position - low)
    return colors


def group_styles(groups: Iterable[dict]) -> dict[str, dict]:
    """Per group label (a collective, size and variant of a page's runs): its size's colour and its collective and
    variant's dash, the same in every chart of the page."""
    groups = list(groups)
    colors = size_colors(group.get("size_bytes") for group in groups)
    kinds = list(dict.fromkeys((group["collective"], group.get("variant", "")) for group in groups))
    return {
        group["label"]: {
            "color": colors[group.get("size_bytes")],
            "dash": DASHES[kinds.index((group["collective"], group.get("variant", ""))) % len(DASHES)],
        }
        for group in groups
    }


def kind_marker(index: int) -> dict:
    """The bar fill of a step's ``index``-th kind of collective."""
    pattern = KIND_PATTERNS[index % len(KIND_PATTERNS)]
    return {"color": KIND_COLORS[index % len(KIND_COLORS)], **({"pattern": {"shape": pattern}} if pattern else {})}
