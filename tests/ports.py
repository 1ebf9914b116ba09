"""A free TCP port on localhost, for the servers, clusters and process groups tests start."""

import socket


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
