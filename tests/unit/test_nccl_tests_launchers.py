"""What an nccl-tests log prints, read through what people do to it: a launcher's prefix on every line (srun -l's
" 0: ", Open MPI's --tag-output "[1,0]<stdout>:"), and rank lines left out of a pasted excerpt, where the rank
count comes from the numbers (busbw/algbw) and the highest rank printed bounds it."""

from emuplan.results import parse_result_file
from real_logs import REAL_LOGS

GB300_RACK = REAL_LOGS / "23-gb300-nvl72-16x4-allreduce-oci.txt"
SRUN = REAL_LOGS / "09-h100-sxm-2x8-ndr-ib-default-allreduce.txt"
HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
    "#wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
)
# One rank line pasted of 72 (rank 71): all-reduce busbw/algbw = 2 × 71/72 = 1.9722 in every row.
EXCERPT_72 = (
    "#  Rank 71 Group  0 Pid 4242 on node-09 device  7 [0x00] NVIDIA H100 80GB HBM3\n#\n" + HEADER
    + "  1073741824     268435456     float     sum      -1   5000.0  214.75  423.53      0"
    "   5000.0  214.75  423.53      0\n"
    "  2147483648     536870912     float     sum      -1  10000.0  214.75  423.53      0"
    "  10000.0  214.75  423.53      0\n"
    "# Avg bus bandwidth    : 423.53\n"
)  # fmt: skip


def test_srun_prefixed_lines_read_as_the_log_printed_them():
    parsed = parse_result_file(SRUN.read_bytes(), SRUN.name)
    assert (parsed.ranks, parsed.hosts) == (16, 2)
    assert all(line.startswith(" 0: ") for line in SRUN.read_text().splitlines() if line)
    assert parsed.reported_avg_busbw == {"all_reduce": 142.735}  # its " 0: # Avg bus bandwidth : 142.735"


def test_open_mpi_tagged_lines_read_as_the_plain_log():
    text = GB300_RACK.read_text()
    tagged = "".join(f"[1,0]<stdout>:{line}" for line in text.splitlines(keepends=True))
    plain, parsed = parse_result_file(text.encode(), "gb300.txt"), parse_result_file(tagged.encode(), "gb300.txt")
    assert parsed.samples.to_pylist() == plain.samples.to_pylist()
    assert (parsed.ranks, parsed.reported_avg_busbw) == (64, {"all_reduce": 455.539})


def test_elided_rank_lines_infer_the_count_from_busbw_over_algbw_and_say_so():
    rack = parse_result_file(GB300_RACK.read_bytes(), GB300_RACK.name)
    # Ranks 0, 1, 62 and 63 printed, "..." between them: 930.60 / 472.69 = 2 × 63/64.
    assert (rack.ranks, rack.hosts) == (64, None)
    assert (
        f"{GB300_RACK.name}: rank lines up to rank 63 printed, 4 of them; 64 ranks inferred from the busbw/algbw factor"
        in rack.warnings
    )
    excerpt = parse_result_file(EXCERPT_72.encode(), "excerpt.txt")
    assert (excerpt.ranks, excerpt.hosts) == (72, None)
    assert (
        "excerpt.txt: rank lines up to rank 71 printed, 1 of them; 72 ranks inferred from the busbw/algbw factor"
        in excerpt.warnings
    )
