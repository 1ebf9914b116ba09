"""What a saved plan or comparison is known by (its name, tags and note), as ``PATCH /api/plans/{id}`` and
``PATCH /api/comparisons/{id}`` change it: one body for both (``store.rows.relabel`` makes the change). A run's
are its own: ``services.runs.RunUpdate``."""

from pydantic import BaseModel, ConfigDict, Field


class LabelChanges(BaseModel):
    """Rename, retag or annotate: only the fields given change."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=200)
    tags: list[str] | None = Field(default=None, max_length=100, description="Replace its tags.")
    note: str | None = Field(default=None, max_length=4000, description="Free text; '' clears it.")

    def given(self) -> dict[str, str | list[str] | None]:
        """The changes as ``store.rows.relabel``'s keywords; a body that gives none is refused (422)."""
        if not self.model_fields_set:
            raise ValueError("changes: give at least one of " + ", ".join(type(self).model_fields))
        return {"name": self.name, "tags": self.tags, "note": self.note}
