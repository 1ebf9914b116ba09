"""One colour, one meaning: runs wear the same colour in every chart of a page, sizes a sequential scale that
never repeats, and past the run palette a dash tells runs apart."""

from emuplan.charts.figures import comparison_cdf_figure, comparison_sweep_figure
from emuplan.charts.palette import RUN_COLORS, SIZE_SCALE, group_styles, run_style, size_colors


def test_eleven_sizes_from_971048_bytes_to_8_gib_wear_eleven_colours_in_size_order():
    sizes = [971048, *(1 << power for power in range(24, 34))]
    colors = size_colors(sizes)
    assert len({colors[size] for size in sizes}) == 11
    assert colors[971048] == SIZE_SCALE[0] and colors[1 << 33] == SIZE_SCALE[-1]
    assert colors[None] == "#7f7f7f"
    # Two sizes are the scale's two ends; a size between them is a mix of its neighbours.
    assert size_colors([2600, 803840, 8589934592])[803840] == "#26828e"


def test_every_run_a_page_can_show_looks_different():
    styles = [tuple(run_style(index).values()) for index in range(len(RUN_COLORS) * 6)]
    assert len(set(styles)) == len(styles) == 144
    assert run_style(0) == {"color": "#2E91E5", "dash": "solid"}
    assert run_style(24) == {"color": "#2E91E5", "dash": "dash"}


def test_groups_of_one_size_differ_by_their_collectives_dash():
    groups = [
        {"label": "all_reduce · 1 MiB", "collective": "all_reduce", "variant": "", "size_bytes": 1 << 20},
        {"label": "all_gather · 1 MiB", "collective": "all_gather", "variant": "", "size_bytes": 1 << 20},
    ]
    assert group_styles(groups) == {
        "all_reduce · 1 MiB": {"color": SIZE_SCALE[0], "dash": "solid"},
        "all_gather · 1 MiB": {"color": SIZE_SCALE[0], "dash": "dash"},
    }


def test_a_run_keeps_its_colour_from_the_sweep_overlay_to_the_cdf_overlay():
    sweep = {"groups": [{"collective": "all_reduce", "variant": "out-of-place", "size_bytes": 8, "busbw_gbps": 1.0}]}
    distribution = {
        "overall_ecdf": {"x": [1.0, 2.0], "p": [0.5, 1.0]},
        "overall": {"p50_us": 1.0, "p90_us": 2.0, "p99_us": 2.0, "p99_9_us": 2.0, "max_us": 2.0},
    }
    # The page compares #1 (a distribution), #2 (a sweep), #3 (a distribution).
    sweeps = comparison_sweep_figure([("#2 sweep", sweep)], [1])
    cdfs = comparison_cdf_figure([("#1 a", distribution), ("#3 b", distribution)], places=[0, 2])
    assert [trace["line"]["color"] for trace in sweeps["data"]] == [RUN_COLORS[1]]
    assert [trace["line"]["color"] for trace in cdfs["data"] if trace["mode"] != "markers"] == [
        RUN_COLORS[0],
        RUN_COLORS[2],
    ]
