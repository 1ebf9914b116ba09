"""Hatchling build hook: a wheel carries the templates, static files and Alembic scripts inside the
package, so that an installed `emuplan serve` finds them (settings.bundled_dir looks there first).

An editable install needs no copy: it reads them from the checkout, so they are added to the standard
wheel only (a force-include in pyproject.toml would copy them into site-packages for editable ones too).
"""

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class BundleServerFiles(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if version == "standard":
            build_data["force_include"].update({"frontend": "emuplan/frontend", "migrations": "emuplan/migrations"})
