"""What the background jobs run on a worker's threads share (``api/jobs.py``, ``api/simulation_jobs.py``,
``api/relabel_jobs.py``):
the progress the job's thread reports and the heartbeat thread that writes it to the job's row every
``HEARTBEAT_S`` and reads the cancel flag any worker may set there."""

import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import OperationalError

from emuplan.store.db import DatabaseBusy
from emuplan.store.job_records import HEARTBEAT_S


class JobProgress:
    """What the job's thread last reported, written to the database with each heartbeat."""

    def __init__(self) -> None:
        self._fields: dict[str, Any] = {}
        self._lock = threading.Lock()  # the job's thread writes, the heartbeat's reads
        self.state_changed = threading.Event()

    def update(self, **fields: Any) -> None:
        with self._lock:
            self._fields.update(fields)
        if "state" in fields:
            self.state_changed.set()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._fields)


def heartbeat(
    beat: Callable[..., bool],
    job_id: str,
    progress: JobProgress,
    cancel: Callable[[], None],
    done: threading.Event,
) -> None:
    """Progress out (``beat(job_id, **progress)``, which answers whether a cancel was asked for), the cancel in
    (``cancel()``: an event set, a launcher's processes killed), until the job's thread is done."""
    while not done.is_set():
        progress.state_changed.clear()
        try:
            if beat(job_id, **progress.snapshot()):
                cancel()
        except (DatabaseBusy, OperationalError):  # the database busy or unreachable for a moment: the next beat retries
            pass
        # A state change is written at once; progress within a state every HEARTBEAT_S.
        progress.state_changed.wait(HEARTBEAT_S)
