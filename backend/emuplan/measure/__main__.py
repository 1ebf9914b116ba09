"""``python -m emuplan.measure``: one rank of a measurement (see ``emuplan.measure.worker``)."""

import os
import sys

from emuplan.measure.worker import main

code = main()
# Results are on disk and the process group is gone; tearing down an interpreter with torch loaded
# takes seconds on a busy machine, and every rank's launcher waits for it. An uncaught exception
# never gets here: Python reports it and exits 1 as usual.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
