"""What a user states of a run, at import or later, as plain data: the one place each field is written.

From ``RUN_FIELDS``: the upload's form fields (``POST /api/runs``) and a run's changes (``services.runs.RunUpdate``,
``PATCH /api/runs/{id}``) take their descriptions and limits, the run's documents (``RunPublic``) their
descriptions, ``emuplan import`` and ``emuplan runs edit`` their options' help, the pages' upload and edit forms
their labels, placeholders and lengths, and ``services.runs``' checks their limits. Adding a stated field is an
entry here, a column of ``store.tables.Run`` and a migration; ``tests/unit/test_run_fields.py`` names what a
half-added field misses. Standard library only (and ``platform_fields``, which is too), so that the CLI's start-up
builds the options without pydantic.
"""

from dataclasses import dataclass

from emuplan.workload.platform_fields import PLATFORM_FIELDS

# Each tag of a run makes its own series on /metrics (per platform, ranks and collective): 8,000 tags in one form
# field and 50 runs made one scrape 180 MB, 1.6 M samples, 24 s.
MAX_TAGS = 20
MAX_TAG_LENGTH = 64
MAX_FACTS = 40
MAX_FACT_KEY = 64
MAX_FACT_VALUE = 200
MAX_NOTE = 4000
MAX_NAME = 200


@dataclass(frozen=True)
class RunField:
    """One field a user states of a run. ``title`` is the pages' label, ``description`` what the API documents
    and the CLI's help says (each surface adds only how it is given there: comma-separated, repeated…)."""

    title: str
    description: str
    max_length: int | None = None  # of the text, of each tag, of each fact's value
    max_items: int | None = None  # tags, facts
    example: str | None = None  # a page's placeholder

    def described(self, given: str = "") -> str:
        """Its description followed by how one surface takes it (``given``: "Comma-separated.", "Repeat for
        several.")."""
        return f"{self.description} {given}".strip()


RUN_FIELDS: dict[str, RunField] = {
    "name": RunField("Name", "Its name, as lists and pages show it.", max_length=MAX_NAME),
    "tags": RunField(
        "Tags",
        f"Labels to find it by (a list's tag filter, the /metrics series): at most {MAX_TAGS}, each of "
        f"{MAX_TAG_LENGTH} characters at most.",
        max_length=MAX_TAG_LENGTH,
        max_items=MAX_TAGS,
        example="comma separated",
    ),
    "note": RunField("Note", "Free text: what was changed, what to look at.", max_length=MAX_NOTE),
    "facts": RunField(
        "Fabric facts",
        f"What it ran on, key = value (topology, NIC, switch, firmware, NCCL version…): at most {MAX_FACTS}, "
        f"keys of {MAX_FACT_KEY} and values of {MAX_FACT_VALUE} characters at most.",
        max_length=MAX_FACT_VALUE,
        max_items=MAX_FACTS,
        example="one a line: nic = ConnectX-7, nccl = 2.21.5, topology = rail-optimised",
    ),
    "platform": RunField(
        "Platform",
        "The platform profile it ran on (GET /api/platforms, emuplan platforms list): its expected curve, % of "
        "expected and verdict follow.",
        max_length=PLATFORM_FIELDS["name"].max_length,
    ),
    "plan_id": RunField(
        "Plan",
        "The plan it measures: its network gives the ideal times and % of ideal, its GPUs the rank count.",
    ),
    "measured_at": RunField(
        "Measured at",
        "When it was measured, ISO 8601 with its UTC offset (2026-11-03T02:00Z): a series orders runs by it, else "
        "by when they were imported.",
    ),
}
