"""`emuplan serve` runs uvicorn with its defaults, which pick httptools and uvloop when they are installed:
the C HTTP parser and libuv's loop receive an upload several times faster than h11 and asyncio's loop."""

import sys

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


async def no_app(scope, receive, send) -> None:
    pass


def default_config() -> uvicorn.Config:
    """uvicorn's configuration with the defaults `serve` leaves to it (``http`` and ``loop``: "auto")."""
    config = uvicorn.Config(no_app)
    config.load()
    return config


def test_the_server_parses_http_with_httptools():
    assert default_config().http_protocol_class is HttpToolsProtocol


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is not installed on Windows")
def test_the_server_runs_on_uvloop():
    import uvloop

    loop = default_config().get_loop_factory()()
    try:
        assert type(loop) is uvloop.Loop
    finally:
        loop.close()
