"""A CSV of several blocks uploaded over the API: the run stores what parsing the whole file gives, read a
block at a time or (a column type changing further down) whole."""

import io

import pyarrow.parquet as pq
import pytest

from emuplan.results import parse_result_file

pytestmark = pytest.mark.both_databases


def csv_of(rows: int, last: str) -> bytes:
    lines = "".join(f"{i},{8 << (i % 4)},all_reduce,{10 + i % 5}\n" for i in range(rows))
    return b"iteration,size,collective,time_us\n" + lines.encode() + last.encode()


@pytest.mark.parametrize(
    "data",
    [csv_of(150_000, "150000,8,all_reduce,12\n"), csv_of(150_000, "150000,8,all_reduce,2.5\n")],
    ids=["read a block at a time", "type changes after the first block: read whole"],
)
def test_a_multi_block_csv_upload_stores_what_parsing_the_whole_file_gives(client, data):
    assert len(data) > 2 * 1024**2
    response = client.post("/api/runs", files={"file": ("big.csv", data)})
    assert response.status_code == 201
    stored = pq.read_table(io.BytesIO(client.get(f"/api/runs/{response.json()['id']}/samples.parquet").content))
    assert stored.equals(parse_result_file(data, "big.csv").samples)
    assert stored.num_rows == 150_001
    assert stored["duration_us"].to_pylist()[-2:] == [14.0, float(data.rsplit(b",", 1)[1])]
