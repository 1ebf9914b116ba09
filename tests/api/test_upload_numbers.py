"""Numbers out of range in an uploaded result: 400 naming file, row and column, nothing stored.

Through the real HTTP server: the defect was a 500 while writing the response of a run already
committed, which only the served JSON shows."""

import httpx2
import pytest

from live_server import LiveServer

pytestmark = pytest.mark.both_databases

HEADER = "iteration,size,collective,{column}\n"


def upload(server: LiveServer, name: str, text: str) -> httpx2.Response:
    return httpx2.post(f"{server.url}/api/runs", files={"file": (name, text.encode())}, timeout=60)


@pytest.mark.parametrize(
    ("column", "row", "message"),
    [
        (
            "time_ms",
            "0,1024,all_reduce,1e306",
            "huge.csv: line 2, column 'time_ms': 1e+306 is not a valid time: too large to count in µs (check the unit)",
        ),
        (
            "time_s",
            "0,1024,all_reduce,1e303",
            "huge.csv: line 2, column 'time_s': 1e+303 is not a valid time: too large to count in µs (check the unit)",
        ),
        (
            "time_ms",
            "0,1024,all_reduce,1e-320",
            "huge.csv: line 2, column 'time_ms': 1e-320 is not a valid time: shorter than a femtosecond but not 0 "
            "(check the unit)",
        ),
        (
            "time_ms",
            "0,1e30,all_reduce,1.5",
            "huge.csv: line 2, column 'size': 1e+30 bytes is more than a size can hold (2^63 − 1)",
        ),
        (
            "time_ms",
            "99999999999999999999999,1024,all_reduce,1.5",
            "huge.csv: line 2, column 'iteration': 1e+23 is not an iteration number (a whole number below 2^63)",
        ),
    ],
)
def test_out_of_range_numbers_are_400_with_row_and_column_and_nothing_is_stored(
    live_server: LiveServer, column: str, row: str, message: str
) -> None:
    text = HEADER.format(column=column) + row + "\n"
    response = upload(live_server, "huge.csv", text)
    assert (response.status_code, response.json()) == (400, {"detail": message})
    assert httpx2.get(f"{live_server.url}/api/runs").json() == []
    # Nothing half-written: the same bytes are not a duplicate of anything.
    assert upload(live_server, "huge.csv", text).status_code == 400


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (
            '{"size": 1024, "out_of_place": {"time": 1e-320}}',
            "report.json: results[0].out_of_place.time[0]: 1e-320 is not a valid time in µs: shorter than a "
            "femtosecond but not 0 (check the unit)",
        ),
        (
            '{"size": 1180591620717411303424, "out_of_place": {"time": 12.5}}',
            "report.json: results[0].size: 1180591620717411303424 is not a byte count below 2^63",
        ),
    ],
)
def test_nccl_tests_json_numbers_out_of_range_are_400(live_server: LiveServer, result: str, message: str) -> None:
    document = '{"args": ["all_reduce_perf"], "results": [' + result + "]}"
    response = upload(live_server, "report.json", document)
    assert (response.status_code, response.json()) == (400, {"detail": message})
    assert httpx2.get(f"{live_server.url}/api/runs").json() == []
