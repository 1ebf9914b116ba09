"""An upload's CSV is read while it arrives: the spool read back as it grows, and what the run stores."""

import io
import threading

import pyarrow.parquet as pq
import pytest

from emuplan.api.uploads import GrowingFile
from emuplan.results import parse_result_file

pytestmark = pytest.mark.both_databases


def test_a_growing_file_waits_for_the_bytes_asked_for_until_the_part_is_complete(tmp_path):
    path = tmp_path / "upload"
    with path.open("wb") as spool, GrowingFile(path) as growing:
        reads: list[bytes] = []
        reader = threading.Thread(target=lambda: reads.extend([growing.read(10), growing.read(10), growing.read(10)]))
        reader.start()
        spool.write(b"12345")
        spool.flush()
        growing.grew(5)
        reader.join(0.3)
        assert reader.is_alive() and reads == []  # 5 of the 10 bytes are there: it waits
        spool.write(b"67890abc")
        spool.flush()
        growing.grew(13)
        growing.complete()
        reader.join(10)
        assert reads == [b"1234567890", b"abc", b""]


def test_a_growing_file_read_fails_once_the_upload_stops(tmp_path):
    path = tmp_path / "upload"
    with path.open("wb"), GrowingFile(path) as growing:
        errors: list[str] = []

        def read() -> None:
            try:
                growing.read(10)
            except OSError as error:
                errors.append(str(error))

        reader = threading.Thread(target=read)
        reader.start()
        growing.stop()
        reader.join(10)
        assert errors == ["the upload stopped before the file part was complete"]


def csv_of(rows: int, last: str) -> bytes:
    lines = "".join(f"{i},{8 << (i % 4)},all_reduce,{10 + i % 5}\n" for i in range(rows))
    return b"iteration,size,collective,time_us\n" + lines.encode() + last.encode()


@pytest.mark.parametrize(
    "data",
    [csv_of(150_000, "150000,8,all_reduce,12\n"), csv_of(150_000, "150000,8,all_reduce,2.5\n")],
    ids=["read as it arrives", "type changes after the first block: read whole"],
)
def test_a_multi_block_csv_upload_stores_what_parsing_the_whole_file_gives(client, data):
    assert len(data) > 2 * 1024**2
    response = client.post("/api/runs", files={"file": ("big.csv", data)})
    assert response.status_code == 201
    stored = pq.read_table(io.BytesIO(client.get(f"/api/runs/{response.json()['id']}/samples.parquet").content))
    assert stored.equals(parse_result_file(data, "big.csv").samples)
    assert stored.num_rows == 150_001
    assert stored["duration_us"].to_pylist()[-2:] == [14.0, float(data.rsplit(b",", 1)[1])]
