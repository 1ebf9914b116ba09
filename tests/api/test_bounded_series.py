"""Series stay bounded: a run's tags are capped in number and length (each makes a series on /metrics; 8,000 in
one form field and 50 runs made a scrape of 180 MB), and one /metrics scrape exposes at most
EMUPLAN_METRICS_MAX_SERIES series, counting the rest, streamed a metric family at a time. Through a real server."""

from collections.abc import Iterator

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from emuplan.settings import Settings
from emuplan.store.db import Database
from live_server import LiveServer, start_server, stop_server
from nightly import import_nights, nightly_log

pytestmark = pytest.mark.both_databases


def upload(server: LiveServer, tags: str) -> httpx2.Response:
    return httpx2.post(
        f"{server.url}/api/runs", files={"file": ("night.txt", nightly_log(1))}, data={"tags": tags}, timeout=60
    )


def test_tags_are_capped_in_number_and_length_with_422_naming_the_field(live_server: LiveServer) -> None:
    audit = ",".join(f"t{index}" for index in range(8000))
    long_tag = "x" * 65
    answers = [upload(live_server, tags) for tags in (audit, ",".join(f"t{i}" for i in range(21)), f"ok,{long_tag}")]
    assert [(answer.status_code, answer.json()) for answer in answers] == [
        (422, {"detail": "tags: at most 20 tags a run, got 8000"}),
        (422, {"detail": "tags: at most 20 tags a run, got 21"}),
        (422, {"detail": "tags: 'xxxxxxxxxxxxxxxxxxxx'… is 65 characters long, at most 64"}),
    ]
    assert httpx2.get(f"{live_server.url}/api/runs").json() == []
    most = [f"{index:02d}".ljust(64, "x") for index in range(20)]
    stored = upload(live_server, ",".join(most))
    assert stored.status_code == 201, stored.text
    assert stored.json()["tags"] == most
    run = stored.json()["id"]
    refused = httpx2.patch(f"{live_server.url}/api/runs/{run}", json={"tags": [*most, "one more"]})
    assert refused.status_code == 422
    assert [(e["loc"], e["msg"]) for e in refused.json()["detail"]] == [
        (["body", "tags"], "List should have at most 20 items after validation, not 21")
    ]
    refused = httpx2.patch(f"{live_server.url}/api/runs/{run}", json={"tags": [long_tag]})
    assert refused.status_code == 422
    assert [(e["loc"], e["msg"]) for e in refused.json()["detail"]] == [
        (["body", "tags", 0], "String should have at most 64 characters")
    ]
    assert httpx2.get(f"{live_server.url}/api/runs/{run}").json()["tags"] == most


@pytest.fixture
def two_series_server(database_url: str, database: Database) -> Iterator[LiveServer]:
    # Two nights tagged "nightly" and "rack-7": three series of all_reduce at 16 ranks ("" for every tag, each tag).
    import_nights(database, 2, tags=("nightly", "rack-7"))
    live = start_server(Settings(database_url=database_url, demo=False, metrics_public=True, metrics_max_series=2))
    yield live
    stop_server(live)


def test_a_scrape_exposes_at_most_the_series_cap_counting_the_rest(two_series_server: LiveServer) -> None:
    with httpx2.stream("GET", f"{two_series_server.url}/metrics") as response:
        assert response.status_code == 200
        # Sent as it is written: no length known before.
        assert response.headers.get("transfer-encoding") == "chunked"
        assert "content-length" not in response.headers
        text = response.read().decode()
    families = {family.name: family.samples for family in text_string_to_metric_families(text)}
    assert [sample.value for sample in families["emuplan_metrics_series_dropped"]] == [1]
    kept = sorted(sample.labels["tag"] for sample in families["emuplan_series_latest_run_id"])
    assert kept == ["", "nightly"]
