"""The timing threads' scheduling: SCHED_FIFO where the kernel allows it, restored afterwards, and a
stated fallback where it does not (checked in a process that really lacks the privilege)."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from emuplan.measure.options import TimingScheduling
from emuplan.measure.worker import timing_scheduling
from scheduling import FIFO_POLICY, NOT_PERMITTED_POLICY, realtime_allowed


def thread_policies() -> dict[int, tuple[int, int]]:
    return {
        int(name): (os.sched_getscheduler(int(name)), os.sched_getparam(int(name)).sched_priority)
        for name in os.listdir("/proc/self/task")
    }


@pytest.mark.skipif(not realtime_allowed(), reason="this process may not use SCHED_FIFO (no CAP_SYS_NICE or rtprio)")
def test_realtime_puts_every_thread_at_fifo_and_restores_them() -> None:
    # A second thread stands in for the backend's worker threads, which exist before the timing starts.
    release = threading.Event()
    helper = threading.Thread(target=release.wait)
    helper.start()
    try:
        before = thread_policies()
        assert len(before) >= 2 and set(before.values()) == {(os.SCHED_OTHER, 0)}
        with timing_scheduling(TimingScheduling.REALTIME) as policy:
            assert policy == FIFO_POLICY
            assert thread_policies() == {thread_id: (os.SCHED_FIFO, 1) for thread_id in before}
        assert thread_policies() == before
    finally:
        release.set()
        helper.join()


def test_normal_leaves_the_threads_alone() -> None:
    before = thread_policies()
    with timing_scheduling(TimingScheduling.NORMAL) as policy:
        assert policy == "normal priority (as asked)"
        assert thread_policies() == before


UNPRIVILEGED_PROBE = """
import os
from emuplan.measure.worker import timing_scheduling
from emuplan.measure.options import TimingScheduling
with timing_scheduling(TimingScheduling.REALTIME) as policy:
    print(policy)
    print(os.sched_getscheduler(0) == os.SCHED_OTHER)
"""


def test_without_the_privilege_it_runs_at_normal_priority_and_says_why(tmp_path: Path) -> None:
    # CAP_SYS_NICE gone from the bounding set (so root's exec does not get it back) and an rtprio limit of 0:
    # what a non-root user or a default Docker container gets.
    result = subprocess.run(
        [
            "setpriv",
            "--inh-caps=-sys_nice",
            "--bounding-set=-sys_nice",
            "prlimit",
            "--rtprio=0",
            sys.executable,
            "-c",
            UNPRIVILEGED_PROBE,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [NOT_PERMITTED_POLICY, "True"]
