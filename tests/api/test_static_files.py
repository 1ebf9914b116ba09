"""Static files: versioned URLs cached for a year, gzipped for browsers that take it, Plotly from the
installed package."""

import gzip
import re

from fastapi.testclient import TestClient

from emuplan.api.static_files import IMMUTABLE, PLOTLY_JS, StaticFiles

PAGES = ("/", "/plan", "/runs", "/compare")
STATIC_URL = re.compile(r'(?:src|href)="(/static/[^"]+)"')
RELATIVE_IMPORT = re.compile(r'from "\./([\w.-]+)"')


def test_every_page_asset_and_module_import_is_versioned_and_immutable(client: TestClient) -> None:
    version = client.app.state.static_files.version
    pending = {url for path in PAGES for url in STATIC_URL.findall(client.get(path).text)}
    assert f"/static/{version}/app.css" in pending
    fetched = set()
    while pending:
        url = pending.pop()
        fetched.add(url)
        assert url.startswith(f"/static/{version}/"), url
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable", url
        if url.endswith(".js"):  # the ES modules' imports resolve inside the same version
            pending |= {f"/static/{version}/{name}" for name in RELATIVE_IMPORT.findall(response.text)} - fetched
    assert f"/static/{version}/util.js" in fetched


def test_plotly_travels_gzipped_and_unpacks_to_the_installed_bundle(client: TestClient) -> None:
    url = client.app.state.static_files.url("plotly.min.js")
    bundle = PLOTLY_JS.read_bytes()
    compressed = client.get(url, headers={"Accept-Encoding": "gzip, deflate"})
    assert compressed.headers["content-encoding"] == "gzip"
    assert compressed.headers["content-type"] == "text/javascript; charset=utf-8"
    assert compressed.headers["vary"] == "Accept-Encoding"
    assert compressed.content == bundle
    assert compressed.num_bytes_downloaded < len(bundle) * 0.35
    assert gzip.decompress(client.app.state.static_files.files["plotly.min.js"].gzipped) == bundle
    plain = client.get(url, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert plain.num_bytes_downloaded == len(bundle)
    assert plain.headers["cache-control"] == IMMUTABLE


def test_other_versions_and_unknown_files_are_not_found(client: TestClient) -> None:
    version = client.app.state.static_files.version
    assert client.get("/static/0000000000000000/app.css").status_code == 404
    assert client.get(f"/static/{version}/missing.js").status_code == 404
    assert client.get(f"/static/{version}/../settings.py").status_code == 404
    assert client.get("/static/app.css").status_code == 404


def test_a_changed_file_gets_a_new_version(tmp_path) -> None:
    (tmp_path / "app.css").write_text("body { color: black; }")
    before = StaticFiles(tmp_path)
    assert before.url("app.css") == f"/static/{before.version}/app.css"
    assert StaticFiles(tmp_path).version == before.version
    (tmp_path / "app.css").write_text("body { color: navy; }")
    assert StaticFiles(tmp_path).version != before.version
