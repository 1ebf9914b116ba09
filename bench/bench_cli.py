"""CLI start-up: `emuplan --help` and `emuplan plan --model fashion-mnist-mlp`, as a user runs them.

Target: each ≤ 0.5 s wall, i.e. ≤ 0.2× a bare `python -c "import torch"` measured in the same rounds
(commands import only what they use; neither of these needs torch).

    .venv/bin/python bench/bench_cli.py
"""

import statistics
import sys
from pathlib import Path

from paired import load_average, paired_rounds, ratios, spread, wall_seconds

ROUNDS = 7
EMUPLAN = str(Path(sys.executable).with_name("emuplan"))
COMMANDS = {
    "bare `import torch`": [sys.executable, "-c", "import torch"],
    "emuplan --help": [EMUPLAN, "--help"],
    "emuplan plan --model fashion-mnist-mlp": [EMUPLAN, "plan", "--model", "fashion-mnist-mlp"],
}
BASELINE = "bare `import torch`"
TARGET_RATIO = 0.2


def main() -> int:
    print(f"CLI start-up, {ROUNDS} paired rounds (load average before: {load_average()})")
    for command in COMMANDS.values():  # warm the page cache once, outside the rounds
        wall_seconds(command)
    values = paired_rounds({name: lambda command=command: wall_seconds(command) for name, command in COMMANDS.items()},
                           ROUNDS)  # fmt: skip
    print(f"  {BASELINE:<42} {spread(values[BASELINE], unit=' s')}")
    failed = False
    for name in COMMANDS:
        if name == BASELINE:
            continue
        ratio = ratios(values, name, BASELINE)
        ok = statistics.median(ratio) <= TARGET_RATIO
        failed |= not ok
        verdict = "ok" if ok else "MISSED"
        print(f"  {name:<42} {spread(values[name], unit=' s')}")
        print(f"  {'':<42} ratio to bare import torch {spread(ratio)}x (target ≤ {TARGET_RATIO}x) {verdict}")
    print(f"  load average after: {load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
