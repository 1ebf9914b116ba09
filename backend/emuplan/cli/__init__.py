"""The ``emuplan`` command line. Each module below adds its commands to the one Typer app.

Glue like ``api/``: planning through ``emuplan.services.plans``, storage through ``store/``. May import every
package; reaches ``api/`` only through ``main.create_app`` (``emuplan serve``).
"""

from emuplan.cli import (  # noqa: F401  (registers commands)
    backup,
    manage,
    measure,
    plan,
    platforms,
    results,
    serve,
    simulate,
    trend,
    users,
    workload,
)
from emuplan.cli.app import app

__all__ = ["app"]
