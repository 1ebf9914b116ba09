"""What the measurement worker's timing threads should run at on this machine, read off the kernel.

SCHED_FIFO needs CAP_SYS_NICE in the effective capability set (root has it, a default Docker container
does not) or an RLIMIT_RTPRIO of 1 or more; tests expect the real-time policy exactly when one holds.
"""

import resource
from pathlib import Path

CAP_SYS_NICE = 23  # bit number in /proc/self/status's CapEff mask (linux/capability.h)


def realtime_allowed() -> bool:
    status = Path("/proc/self/status").read_text().splitlines()
    effective = int(next(line.split()[1] for line in status if line.startswith("CapEff:")), 16)
    return bool(effective >> CAP_SYS_NICE & 1) or resource.getrlimit(resource.RLIMIT_RTPRIO)[0] >= 1


FIFO_POLICY = "SCHED_FIFO priority 1"
NOT_PERMITTED_POLICY = (
    "normal priority (SCHED_FIFO not permitted: needs CAP_SYS_NICE, which root has, or an rtprio limit of 1 or more)"
)
# The policy a measurement asked for "realtime" (the default) runs at here.
EXPECTED_REALTIME_POLICY = FIFO_POLICY if realtime_allowed() else NOT_PERMITTED_POLICY
