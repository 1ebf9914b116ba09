"""A platform profile's fields as plain data: the one place each field is written.

``workload.platforms.Platform`` builds its pydantic fields from ``PLATFORM_FIELDS`` (and so does the JSON API,
whose bodies are ``Platform``), ``emuplan platforms add`` and ``edit`` their options, and the /platforms page
its form. Adding a field is an entry here, a column of ``store.tables.StoredPlatform`` and a migration adding it.
Standard library only, so that the CLI's start-up (``emuplan --help`` builds every option) goes without pydantic,
as ``plan_options`` does for the planning options.
"""

from dataclasses import dataclass, field
from typing import Any

NAME_PATTERN = r"^[a-z0-9][a-z0-9\-]{0,63}$"
NAME_RULE = "1 to 64 lowercase letters, digits and hyphens, starting with a letter or digit"
# Below these % of expected at the large sizes a run is 'degraded', and below the lower one it 'fails'; the
# built-ins' defaults, which each stored profile may change.
DEGRADED_BELOW_PCT = 80.0
FAIL_BELOW_PCT = 50.0
TEXT_LENGTH = 200  # a title, a model or a fabric
SOURCE_LENGTH = 500


@dataclass(frozen=True)
class PlatformField:
    """One field of a profile. ``type``: str, int, float, bool, or list (of text lines). ``default``: ``...`` for
    a field every new profile gives, None for one inferred from the others when left out (``left_out`` says
    how). ``title`` is the page's label (with the unit), ``description`` the API's and the CLI's help."""

    type: type
    title: str
    description: str
    default: Any = ...
    example: str | None = None  # the page's placeholder, "e.g. ..."
    minimum: float | None = None
    exclusive_minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None  # of the text, or of each line of a list
    max_items: int | None = None  # of a list
    pattern: str | None = None
    choices: dict[str, str] = field(default_factory=dict)  # the values a text field takes, as the page names them
    left_out: str | None = None  # what a field with a None default becomes when left out, as the page says it
    option: str | None = None  # the CLI option, when not --the-field-name: a list's option names one line

    @property
    def required(self) -> bool:
        return self.default is ...


PLATFORM_FIELDS: dict[str, PlatformField] = {
    "name": PlatformField(
        str,
        "Name",
        f"The platform's key, what runs and plans name it by: {NAME_RULE}.",
        example="h100-roce-400g",
        max_length=64,
        pattern=NAME_PATTERN,
    ),
    "title": PlatformField(
        str,
        "Title",
        "How pages name it, e.g. 'H100 SXM + NDR 400G'.",
        example="H100 SXM + RoCE 400G",
        max_length=TEXT_LENGTH,
    ),
    "gpu_model": PlatformField(
        str, "GPU model", "The GPU, e.g. 'NVIDIA H100 SXM5 80GB'.", example="NVIDIA H100 SXM5", max_length=TEXT_LENGTH
    ),
    "gpus_per_node": PlatformField(
        int, "GPUs per node", "GPUs per node (per compute tray on an NVL72).", minimum=1, maximum=1024
    ),
    "scale_up_domain_gpus": PlatformField(
        int,
        "GPUs per scale-up domain",
        "GPUs in one NVLink domain: 8 on a DGX/HGX node, 72 on a GB200 NVL72 rack.",
        minimum=1,
        maximum=100_000,
    ),
    "scale_up_fabric": PlatformField(
        str, "Scale-up fabric", "The scale-up fabric, e.g. 'NVLink 4'.", example="NVLink 4", max_length=TEXT_LENGTH
    ),
    "scale_up_gb_s": PlatformField(
        float,
        "Scale-up GB/s per GPU per direction",
        "Scale-up bandwidth per GPU per direction, GB/s (half NVIDIA's bidirectional figure).",
        exclusive_minimum=0,
        maximum=1e6,
    ),
    "scale_out_fabric": PlatformField(
        str,
        "Scale-out fabric",
        "The scale-out fabric, e.g. 'InfiniBand NDR 400G'.",
        example="RoCE 400G",
        max_length=TEXT_LENGTH,
    ),
    "nics_per_node": PlatformField(int, "NICs per node", "Scale-out NICs per node.", minimum=1, maximum=1024),
    "nic_gbit_s": PlatformField(float, "Gbit/s per NIC", "Each NIC's rate, Gbit/s.", exclusive_minimum=0, maximum=1e6),
    "gpu_generation": PlatformField(
        str,
        "GPU generation (NCCL's model)",
        "The GPU's architecture as NCCL's cost model groups them (an Ada or Ampere card is 'ampere'); when left "
        "out: blackwell from 900 GB/s of scale-up, hopper from 450, else ampere.",
        default=None,
        choices={"volta": "volta", "ampere": "ampere", "hopper": "hopper", "blackwell": "blackwell"},
        left_out="from the scale-up rate",
    ),
    "scale_up_link": PlatformField(
        str,
        "Scale-up link",
        "How the GPUs of a node reach each other: NVLink, or only PCIe.",
        default="nvlink",
        choices={"nvlink": "NVLink", "pcie": "PCIe only"},
    ),
    "nvls": PlatformField(
        bool,
        "NVLink SHARP (NVLS)",
        "NVLink SHARP: the NVLink switches reduce (NVSwitch systems from Hopper on); when left out, true for "
        "Hopper and Blackwell over NVLink.",
        default=None,
        left_out="Hopper and Blackwell on NVLink",
    ),
    "degraded_below_pct": PlatformField(
        float,
        "Degraded below, % of expected",
        "A run below this % of expected at the large sizes is 'degraded'.",
        default=DEGRADED_BELOW_PCT,
        exclusive_minimum=0,
        maximum=100,
    ),
    "fail_below_pct": PlatformField(
        float,
        "Fails below, % of expected",
        "A run below this % of expected at the large sizes fails.",
        default=FAIL_BELOW_PCT,
        exclusive_minimum=0,
        maximum=100,
    ),
    "sources": PlatformField(
        list,
        "Sources (datasheet titles and URLs)",
        "Where the figures come from: datasheet titles and URLs.",
        default=(),
        max_length=SOURCE_LENGTH,
        max_items=20,
        option="--source",
    ),
}
