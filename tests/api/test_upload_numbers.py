"""Numbers out of range in an uploaded result: 400 naming file, row and column, nothing stored.

Through the real HTTP server: the defect was a 500 while writing the response of a run already
committed, which only the served JSON shows."""

import io
import zipfile

import httpx2
import pytest

from live_server import LiveServer
from paths import RESULTS

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


DIGITS = "7" * 5000
TRACE = '{"distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "X", "ts": 1},\n {"ph": "X", "ts": %s}]}'


def zipped(name: str, content: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, content)
    return buffer.getvalue()


def with_digits(path, old: str, kept: str = "") -> bytes:
    """The file with its first ``old`` made ``kept`` and 5,000 digits."""
    text = path.read_text()
    assert old in text
    return text.replace(old, kept + DIGITS, 1).encode()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "trace.json",
            (TRACE % DIGITS).encode(),
            "trace.json: line 2, column 20: a number of more than 4300 digits",
        ),
        (
            "log.txt",
            with_digits(RESULTS / "nccl-tests" / "h100-16rank-allreduce-mpirun.txt", "4294967296"),
            "log.txt: line 61, column 3: a number of more than 4300 digits",
        ),
        (
            "fct.txt",
            with_digits(RESULTS / "generated-fct.txt", "1048576"),
            "fct.txt: line 1, column 'size': '77777777777777777777…' is not a 64-bit whole number",
        ),
        (
            "gpu-a.log",
            with_digits(RESULTS / "nccl-inspector" / "constructed-gpu-a-pid101.log", '"n_ranks":2', '"n_ranks":'),
            "gpu-a.log: line 1, column 47: a number of more than 4300 digits",
        ),
        (
            "report.json",
            with_digits(
                RESULTS / "nccl-tests-json" / "constructed-4proc-2host-allreduce-I1.json",
                '"nccl_version":22703',
                '"nccl_version":',
            ),
            "report.json: not valid JSON (a number of more than 4300 digits: line 1 column 214 (char 213))",
        ),
    ],
    ids=["profiler trace", "nccl-tests log", "fct.txt", "Inspector dump", "nccl-tests JSON"],
)
def test_a_number_too_long_for_python_is_400_naming_file_and_place(
    live_server: LiveServer, name: str, content: bytes, message: str
) -> None:
    """A 5,000-digit integer answered 422 with Python's own message ("Exceeds the limit (4300 digits) for integer
    string conversion…"), naming no file. Alone and as a zip member, through the real server."""
    response = httpx2.post(f"{live_server.url}/api/runs", files={"file": (name, content)}, timeout=60)
    assert (response.status_code, response.json()) == (400, {"detail": message})
    if name in ("trace.json", "gpu-a.log"):
        response = httpx2.post(
            f"{live_server.url}/api/runs", files={"file": ("job.zip", zipped(name, content))}, timeout=60
        )
        assert (response.status_code, response.json()) == (400, {"detail": f"job.zip/{message}"})
    assert httpx2.get(f"{live_server.url}/api/runs").json() == []


def test_a_model_file_with_a_number_too_long_for_python_is_400_naming_its_place(live_server: LiveServer) -> None:
    config = '{"model_type": "llama", "hidden_size": ' + DIGITS + ', "num_hidden_layers": 2}'
    header = ('{"w": {"dtype": "F32", "shape": [' + DIGITS + ', 2], "data_offsets": [0, 8]}}').encode()
    safetensors = len(header).to_bytes(8, "little") + header + bytes(8)
    answers = [
        httpx2.post(f"{live_server.url}/api/models", files={"file": (name, content)}, timeout=60)
        for name, content in (("config.json", config.encode()), ("m.safetensors", safetensors))
    ]
    assert [(answer.status_code, answer.json()) for answer in answers] == [
        (
            400,
            {"detail": "config.json: not valid JSON (a number of more than 4300 digits: line 1 column 40 (char 39))"},
        ),
        (
            400,
            {
                "detail": "m.safetensors: the header is not valid JSON (a number of more than 4300 digits: line 1 "
                "column 34 (char 33))"
            },
        ),
    ]
