"""Every figure the API serves is a valid Plotly figure.

``charts/`` writes figures as plain dicts in Plotly's schema without passing them through
``plotly.graph_objects`` (its validators were most of a comparison's time), so these tests do the
validation instead: ``plotly.graph_objects.Figure(figure)`` rejects any property Plotly does not know,
so a misspelt key cannot ship.
"""

import base64

import numpy as np
import plotly.graph_objects as go
import pytest

from emuplan.charts.figures import typed_array
from paths import NCCL_TESTS, RESULTS

# (file, strategy): per-iteration samples (pipeline: one panel per size), flow completion times (three sizes
# overlaid), per-flow records, size sweeps, and files that time every rank (per endpoint; per process on two
# hosts).
UPLOADS = {
    "per-iteration pipeline": (RESULTS / "generated-per-iteration.csv", "pipeline"),
    "flow completion times": (RESULTS / "generated-fct.txt", "data"),
    "per-flow": (RESULTS / "generated-per-flow.csv", "data"),
    "sweep": (NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt", "data"),
    "second sweep": (NCCL_TESTS / "v100-64rank-alltoall-pre2.13.txt", "data"),
    "stragglers": (RESULTS / "constructed-per-flow-stragglers.csv", "data"),
    "two hosts": (RESULTS / "nccl-tests-json" / "constructed-4proc-2host-allreduce-I1.json", "data"),
}
KINDS = ("cdf", "delay", "bandwidth", "sweep", "ranks", "hosts")
OPTIONS = ({}, {"log_x": "true"}, {"log_y": "true", "clip": "true"}, {"clip": "true"})

# What each upload serves (every other kind answers 422 saying why).
SERVED = {
    "per-iteration pipeline": {"cdf", "delay", "bandwidth"},
    "flow completion times": {"cdf", "delay", "bandwidth", "ranks"},
    "per-flow": {"cdf", "delay", "bandwidth", "ranks"},
    "sweep": {"bandwidth", "sweep"},
    "second sweep": {"bandwidth", "sweep"},
    "stragglers": {"cdf", "delay", "bandwidth", "ranks"},
    # -n 4 -I 1: four iterations per size, a size sweep repeated (results.analysis.run_analysis.SWEEP_MAX_SAMPLES).
    "two hosts": {"bandwidth", "sweep", "ranks", "hosts"},
}


@pytest.fixture
def run_ids(client) -> dict[str, int]:
    ids = {}
    for label, (path, strategy) in UPLOADS.items():
        response = client.post(
            "/api/runs", files={"file": (path.name, path.read_bytes())}, data={"name": label, "strategy": strategy}
        )
        assert response.status_code == 201, response.text
        ids[label] = response.json()["id"]
    return ids


def test_every_run_figure_kind_and_option_validates_with_plotly(client, run_ids):
    served: dict[str, set[str]] = {label: set() for label in run_ids}
    for label, run_id in run_ids.items():
        for kind in KINDS:
            for options in OPTIONS:
                response = client.get(f"/api/runs/{run_id}/figures/{kind}", params=options)
                if response.status_code == 422:
                    continue
                assert response.status_code == 200, (label, kind, options, response.text)
                go.Figure(response.json())  # raises ValueError naming any property Plotly does not know
                served[label].add(kind)
    assert served == SERVED


def test_comparison_figures_validate_with_plotly(client, run_ids):
    distributions = ",".join(str(run_ids[label]) for label in ("per-iteration pipeline", "per-flow", "stragglers"))
    sweeps = f"{run_ids['sweep']},{run_ids['second sweep']}"
    mixed = f"{run_ids['per-iteration pipeline']},{run_ids['sweep']}"
    checked = []
    for runs, log_x in ((distributions, "false"), (distributions, "true"), (sweeps, "false"), (mixed, "false")):
        response = client.get("/api/compare", params={"runs": runs, "log_x": log_x})
        assert response.status_code == 200, response.text
        for name, figure in response.json()["figures"].items():
            go.Figure(figure)
            checked.append(name)
    assert checked == [
        *("cdf", "small_multiples", "delays") * 2, "sweeps", "sweeps", "cdf", "small_multiples", "delays",
    ]  # fmt: skip


def test_a_misspelt_property_in_a_served_figure_fails_validation(client, run_ids):
    figure = client.get(f"/api/runs/{run_ids['per-iteration pipeline']}/figures/delay").json()
    figure["layout"]["lengend"] = figure["layout"].pop("legend")
    with pytest.raises(ValueError, match="lengend"):
        go.Figure(figure)


def test_typed_arrays_are_encoded_as_plotly_encodes_a_float32_numpy_array():
    values = np.array([0.5, 1.25, 3.0e6, -7.0], dtype=np.float32)
    assert typed_array(values) == go.Figure(go.Scatter(x=values)).to_dict()["data"][0]["x"]
    encoded = typed_array(values)
    assert encoded["dtype"] == "f4"
    assert np.frombuffer(base64.b64decode(encoded["bdata"]), dtype="<f4").tolist() == [0.5, 1.25, 3.0e6, -7.0]
    # Values of other types are sent as float32 too; an empty curve stays an empty list, as plotly sends it.
    assert typed_array([0.5, 1.25, 3.0e6, -7.0]) == typed_array(values)
    assert typed_array(np.array([], dtype=np.float32)) == []
