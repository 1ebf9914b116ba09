"""The HTML pages as a client without JavaScript sees them: escaping, filters, links, security headers."""

import re
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from emuplan.results import parse_result_file
from emuplan.services import imports as run_imports
from emuplan.store import plans as plan_store
from emuplan.store import runs as run_rows
from emuplan.store.tables import Comparison, Run
from paths import SHARED_NCCL
from sql_capture import sent_queries

pytestmark = pytest.mark.both_databases

XSS_NAME = "<img src=x onerror=alert(1)>"


def _upload(client: TestClient, name: str, strategy: str, tags: str = "") -> int:
    # The name goes into the label column too, so that every run's bytes differ (no duplicate refusal).
    csv = "iteration,data size,collective,completion time (ms),label\n" + "".join(
        f"{i},971048,all_reduce,{12 + i / 7},{name.replace(',', ' ')}\n" for i in range(6)
    )
    data = {"name": name, "strategy": strategy, "tags": tags}
    response = client.post("/api/runs", files={"file": (f"{name}.csv", csv.encode())}, data=data)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_user_strings_are_escaped_in_every_page(client: TestClient) -> None:
    run_id = _upload(client, XSS_NAME, "data", tags="<b>x</b>")
    comparison = client.post("/api/comparisons", json={"name": XSS_NAME, "run_ids": [run_id]}).json()
    token = client.post(f"/api/comparisons/{comparison['id']}/shares", json={}).json()["token"]
    comparison_page = f"/comparisons/{comparison['id']}"
    for path in ("/", "/runs", f"/runs/{run_id}", f"/compare?runs={run_id}", comparison_page, f"/s/{token}"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert XSS_NAME not in page.text, path
        assert "&lt;img src=x onerror=alert(1)&gt;" in page.text, path
        assert "<b>x</b>" not in page.text, path
        # No inline script anywhere: every <script> has a src under /static/<version>/.
        static = f"/static/{client.app.state.static_files.version}/"
        static_script = re.compile(rf'<script(?: type="module")?(?: async)? src="{re.escape(static)}[\w.-]+"></script>')
        assert page.text.count("<script") == len(static_script.findall(page.text)), path


def test_runs_page_filters_by_strategy_and_tag(client: TestClient) -> None:
    _upload(client, "dp-a", "data", tags="lab-a")
    _upload(client, "tp-a", "tensor", tags="lab-a")
    _upload(client, "tp-b", "tensor", tags="lab-b")

    def listed(query: str) -> list[str]:
        text = client.get(f"/runs{query}").text
        return [name for name in ("dp-a", "tp-a", "tp-b") if f">{name}</a>" in text]

    assert listed("") == ["dp-a", "tp-a", "tp-b"]
    assert listed("?strategy=tensor") == ["tp-a", "tp-b"]
    assert listed("?tag=lab-a") == ["dp-a", "tp-a"]
    assert listed("?strategy=tensor&tag=lab-a") == ["tp-a"]
    assert listed("?tag=LAB-A") == ["dp-a", "tp-a"]  # filters match in any case
    assert [run["name"] for run in client.get("/api/runs", params={"tag": "Lab-B"}).json()] == ["tp-b"]


def test_share_page_has_no_way_out(client: TestClient) -> None:
    run_id = _upload(client, "shared run", "data")
    _upload(client, "private run", "data")
    comparison = client.post("/api/comparisons", json={"name": "only this", "run_ids": [run_id]}).json()
    token = client.post(f"/api/comparisons/{comparison['id']}/shares", json={}).json()["token"]
    page = client.get(f"/s/{token}")
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    assert "script-src 'self';" in page.headers["content-security-policy"]
    assert "<a " not in page.text and "<form" not in page.text
    assert "private run" not in page.text
    assert f'data-compare-url="/api/shared/{token}"' in page.text
    # Every chart comes from the comparison's JSON twin: the page asks the API for nothing else.
    assert "data-figure-url" not in page.text
    delays = client.get(f"/api/shared/{token}").json()["figures"]["delays"]
    assert [trace["name"] for trace in delays["data"]] == ["all_reduce · 971048 B"]


def test_runs_page_shows_one_page_at_a_time_with_links_to_the_others(client: TestClient, database) -> None:
    count = run_rows.RUNS_PER_PAGE + 2
    with database.writing() as session:
        for index in range(count):
            csv = b"iteration,size,time_ms\n0,8,%d\n" % (index + 1)
            run_imports.save_run(session, parse_result_file(csv, "r.csv"), name=f"run-{index}", strategy="data")
    first = client.get("/runs").text
    assert f">run-{count - 1}</a>" in first and f">run-{count - run_rows.RUNS_PER_PAGE}</a>" in first
    assert ">run-1</a>" not in first
    assert f"runs 1–{run_rows.RUNS_PER_PAGE} of {count}, newest first" in first
    assert 'href="/runs?strategy=data&amp;page=2" rel="next"' in client.get("/runs?strategy=data").text
    second = client.get("/runs?page=2").text
    assert [name for name in ("run-0", "run-1", "run-2") if f">{name}</a>" in second] == ["run-0", "run-1"]
    assert f"runs {run_rows.RUNS_PER_PAGE + 1}–{count} of {count}, newest first" in second
    assert 'href="/runs?page=1" rel="prev"' in second and 'rel="next"' not in second
    assert ">run-0</a>" in client.get("/runs?page=99").text  # past the end: the last page
    api = client.get("/api/runs", params={"limit": 2, "offset": 1})
    assert [run["name"] for run in api.json()] == [f"run-{count - 2}", f"run-{count - 3}"]
    assert api.headers["x-total-count"] == str(count)
    assert len(client.get("/api/runs").json()) == run_rows.RUNS_PER_PAGE
    assert client.get("/api/runs", params={"limit": 0}).status_code == 422
    compare = client.get("/compare?runs=1").text
    assert f"The newest {run_rows.RUNS_PER_PAGE} of {count} runs" in compare
    assert 'value="1" data-label="#1 run-0" checked' in compare  # a selected older run stays in the picker
    assert 'value="2"' not in compare


def test_counts_agree_in_number_on_the_run_page(client: TestClient) -> None:
    log = SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"
    response = client.post("/api/runs", files={"file": (log.name, log.read_bytes())}, data={"name": "bcast"})
    assert response.status_code == 201, response.text
    page = client.get(f"/runs/{response.json()['id']}").text
    assert " · 12 ranks on 1 host</p>" in page


def test_runs_page_plan_selects_read_only_each_plans_id_and_name(client: TestClient, database) -> None:
    plan = {"model": "fashion-mnist-mlp", "strategy": "data", "gpus": 4}
    first = client.post("/api/plans", json={**plan, "name": "first <plan>"}).json()["id"]
    second = client.post("/api/plans", json={**plan, "name": "second plan"}).json()["id"]
    with database.read_session() as session:
        assert plan_store.plan_names(session, 1000) == [(second, "second plan"), (first, "first <plan>")]
    ((statement, _),) = sent_queries(database, lambda session: plan_store.plan_names(session, 1000))
    assert statement.split("FROM")[0].replace('"', "") == "SELECT plan.id, plan.name \n"  # "plan" quoted or not
    page = client.get(f"/runs?plan={first}").text
    # The upload form's select and the filter's, the filtered plan chosen.
    assert f'<option value="{second}">#{second} second plan</option>' in page
    assert f'<option value="{first}">#{first} first &lt;plan&gt;</option>' in page
    assert f'<option value="{first}" selected>#{first} first &lt;plan&gt;</option>' in page
    assert f'<option value="{second}" >#{second} second plan</option>' in page


def test_home_page_reads_only_what_its_recent_plans_show(client: TestClient) -> None:
    plan = {"model": "fashion-mnist-mlp", "strategy": "data", "gpus": 4}
    first = client.post("/api/plans", json={**plan, "name": "first <plan>"}).json()
    second = client.post("/api/plans", json={**plan, "name": "second plan", "strategy": "tensor"}).json()
    app_database = client.app.state.database
    sent = sent_queries(app_database, lambda _session: client.get("/").raise_for_status())
    plan_selects = [statement for statement, _ in sent if "\nFROM plan " in statement.replace('"', "")]
    assert [statement.split("FROM")[0].replace('"', "") for statement in plan_selects] == [
        "SELECT plan.id, plan.name, plan.strategy, plan.trials \n"  # "plan" quoted or not
    ]
    with app_database.read_session() as session:
        assert plan_store.recent_plans(session, 5) == [
            (second["id"], "second plan", "tensor", second["trials"]),
            (first["id"], "first <plan>", "data", first["trials"]),
        ]
    home = client.get("/").text
    for shown, name in ((second, "second plan"), (first, "first &lt;plan&gt;")):
        row = f'<td><a href="/plans/{shown["id"]}">{name}</a></td><td>{shown["strategy"]}</td>'
        assert f'<tr>{row}<td class="num">{shown["trials"]}</td></tr>' in home
    assert home.index("second plan") < home.index("first &lt;plan&gt;")


def test_list_pages_say_their_times_are_utc(client: TestClient, database) -> None:
    with database.writing() as session:
        run = run_imports.save_run(session, parse_result_file(b"iteration,size,time_ms\n0,8,1\n", "r.csv"), name="r")
        session.get(Run, run.id).created_at = datetime(2026, 11, 21, 10, 5, tzinfo=UTC)
        session.add(Comparison(name="c", run_ids=[run.id], created_at=datetime(2026, 11, 22, 8, 30, tzinfo=UTC)))
    runs_page = client.get("/runs").text
    assert '<th><a href="/runs?sort=oldest">Imported (UTC)</a></th>' in runs_page
    assert (
        '<td data-label="Imported (UTC)"><time datetime="2026-11-21T10:05Z"><span class="when">2026-11-21</span> '
        '<span class="when">10:05</span></time></td>'
    ) in runs_page
    home = client.get("/").text
    assert "<th>Saved (UTC)</th>" in home and "<td>2026-11-22 08:30</td>" in home


def test_the_runs_list_headlines_a_sweep_by_its_peak_busbw_and_a_distribution_by_its_p50(client, database) -> None:
    log = SHARED_NCCL / "b200-allreduce-2.17.6.txt"
    per_iteration = b"iteration,size,time_ms\n" + b"".join(b"%d,8,%d\n" % (i, i + 1) for i in range(5))
    with database.writing() as session:
        sweep = run_imports.save_run(session, parse_result_file(log.read_bytes(), log.name), name="sweep")
        spread = run_imports.save_run(session, parse_result_file(per_iteration, "r.csv"), name="five iterations")
    page = client.get("/runs").text
    assert (sweep.kind, spread.kind) == ("size-sweep", "distribution")
    assert '<td data-label="Headline" class="num headline" data-kind="size-sweep">peak busbw 702.91 GB/s</td>' in page
    # Five samples of 1 … 5 ms: the median is the third.
    assert '<td data-label="Headline" class="num headline" data-kind="distribution">p50 3,000.0 µs</td>' in page
