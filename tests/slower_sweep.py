"""A second real nccl-tests sweep for comparisons: the B200 all-reduce log with its three largest sizes
(512 MiB, 1 GiB, 2 GiB) 25 % slower, printed as nccl-tests would print them."""

from paths import SHARED_NCCL

B200_LOG = SHARED_NCCL / "b200-allreduce-2.17.6.txt"
SLOWER_SIZES = (536870912, 1073741824, 2147483648)
# all_reduce on the log's 16 ranks: busbw = algbw × 2(n − 1)/n.
BUSBW_FACTOR = 2 * 15 / 16


def b200_slower_log() -> bytes:
    """The B200 log with each slower size's time × 1.25 in both variants and its algbw and busbw (so × 0.8)
    computed from that time and rounded to two decimals, as nccl-tests does; the closing '# Avg bus
    bandwidth' line is the mean of the new busbw cells, as nccl-tests prints it (%g)."""
    lines, cells = [], []
    for line in B200_LOG.read_text().splitlines(keepends=True):
        parts = line.split()
        if parts and not line.startswith("#"):
            if int(parts[0]) in SLOWER_SIZES:
                for time in (5, 9):  # out-of-place, in-place
                    slower_us = float(parts[time]) * 1.25
                    algbw = int(parts[0]) / slower_us / 1e3
                    parts[time : time + 3] = [f"{slower_us:.2f}", f"{algbw:.2f}", f"{algbw * BUSBW_FACTOR:.2f}"]
                line = "  ".join(parts) + "\n"
            cells += [float(parts[7]), float(parts[11])]
        if line.startswith("# Avg bus bandwidth"):
            line = f"# Avg bus bandwidth    : {sum(cells) / len(cells):g}\n"
        lines.append(line)
    return "".join(lines).encode()
