"""The figure rules of emuplan.wording that the pages' tables show."""

import pytest

from emuplan.wording import time_in, time_with_unit


@pytest.mark.parametrize(
    ("value_us", "unit", "text"),
    [(-0.001, "ms", "0.00"), (-4.0, "ms", "0.00"), (-5.0, "ms", "-0.01"), (-0.04, "µs", "0.0"), (0.0, "s", "0.000"),
     (-1_806_700.0, "ms", "-1,806.70")],
)  # fmt: skip
def test_a_time_that_rounds_to_nothing_has_no_sign(value_us, unit, text):
    assert time_in(value_us, unit) == text


@pytest.mark.parametrize(
    ("value_us", "text"),
    [(146.52576, "146.5 µs"), (1806.7, "1.81 ms"), (2_500_000.0, "2.500 s"), (None, "—")],
)
def test_a_time_in_its_own_unit_keeps_its_figures(value_us, text):
    assert time_with_unit(value_us) == text
