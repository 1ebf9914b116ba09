"""The ``emuplan`` command line. Each module below adds its commands to the one Typer app."""

from emuplan.cli import measure, plan, results, serve, workload  # noqa: F401  (registers commands)
from emuplan.cli.app import app

__all__ = ["app"]
