"""``python -m emuplan.measure``: one rank of a measurement (see ``emuplan.measure.worker``)."""

import sys

from emuplan.measure.worker import main

sys.exit(main())
