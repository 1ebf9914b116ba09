"""Static files under versioned URLs: ``/static/<version>/<name>``.

The version is a hash of every file's name and content, so a changed file gets a new URL and a
browser may keep what it fetched for a year without asking again (``immutable``). One version covers
the whole directory, so the ES modules' relative imports (``./util.js``) stay versioned too. Text
files are gzipped once per process and sent compressed to browsers that accept gzip: Plotly's
4.8 MB bundle travels as 1.5 MB.
"""

import gzip
import hashlib
import importlib.util
import mimetypes
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

import swagger_ui
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

# Plotly.js from the installed plotly package: no CDN, no build step. Found without importing plotly,
# whose Python side a process serving files does not need.
PLOTLY_JS = Path(importlib.util.find_spec("plotly").origin).parent / "package_data" / "plotly.min.js"
# Swagger UI for /docs from the installed swagger-ui-py package, served here under the strict CSP.
SWAGGER_UI_DIR = Path(swagger_ui.__file__).parent / "static"
SWAGGER_UI_FILES = ("swagger-ui-bundle.js", "swagger-ui.css")
IMMUTABLE = "public, max-age=31536000, immutable"
COMPRESSIBLE_TYPES = ("text/", "application/javascript", "application/json", "image/svg+xml")

router = APIRouter(include_in_schema=False)


@dataclass
class StaticFile:
    content: bytes
    media_type: str

    @cached_property
    def gzipped(self) -> bytes | None:
        if not self.media_type.startswith(COMPRESSIBLE_TYPES):
            return None
        return gzip.compress(self.content, compresslevel=9, mtime=0)


class StaticFiles:
    """The files of one directory plus Plotly's and Swagger UI's bundles, read once, under one content version."""

    def __init__(self, directory: Path):
        paths = {path.relative_to(directory).as_posix(): path for path in directory.rglob("*") if path.is_file()}
        paths[PLOTLY_JS.name] = PLOTLY_JS
        paths.update({f"swagger-ui/{name}": SWAGGER_UI_DIR / name for name in SWAGGER_UI_FILES})
        digest = hashlib.sha256()
        self.files: dict[str, StaticFile] = {}
        for name in sorted(paths):
            content = paths[name].read_bytes()
            digest.update(f"{name}\0{len(content)}\0".encode())
            digest.update(content)
            media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
            if media_type.startswith("text/") or media_type == "application/javascript":
                media_type += "; charset=utf-8"
            self.files[name] = StaticFile(content, media_type)
        self.version = digest.hexdigest()[:16]

    def url(self, name: str) -> str:
        """The versioned URL of ``name`` (a path inside the static directory, or ``plotly.min.js``)."""
        if name not in self.files:
            raise KeyError(f"no static file {name!r}")
        return f"/static/{self.version}/{name}"


@lru_cache
def static_files(directory: Path) -> StaticFiles:
    # One per process and directory: the files are read, hashed and compressed once.
    return StaticFiles(directory)


@router.api_route("/static/{version}/{name:path}", name="static_file", methods=["GET", "HEAD"])
def static_file(version: str, name: str, request: Request) -> Response:
    files: StaticFiles = request.app.state.static_files
    static = files.files.get(name)
    if version != files.version or static is None:
        raise HTTPException(status_code=404, detail=f"no static file {name!r} in version {version!r}")
    headers = {"Cache-Control": IMMUTABLE, "Vary": "Accept-Encoding"}
    body = static.content
    if static.gzipped is not None and "gzip" in request.headers.get("accept-encoding", ""):
        body = static.gzipped
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type=static.media_type, headers=headers)
