"""Platforms: what a run ran on, and the fastest a collective over some of its GPUs can go.

A platform is two levels of fabric. The scale-up domain (NVLink through NVSwitch) joins
``scale_up_domain_gpus`` GPUs, each sending ``scale_up_gb_s`` GB/s per direction to any other; it is one node
on a DGX/HGX (8 GPUs) and a whole rack on a GB200 NVL72 (72 GPUs over 18 trays of 4). Beyond it every node
sends through ``nics_per_node`` NICs of ``nic_gbit_s`` Gbit/s each, shared by its ``gpus_per_node`` GPUs.
A collective's ceiling is the slowest level its ranks span (``ceiling_gbps``).

NVIDIA quotes NVLink bandwidth bidirectional (H100: "900 GB/s"); every figure here is per GPU per direction,
the rate one GPU's sends can reach, as nccl-tests' busbw measures it: half the quoted figure. The built-in
profiles cite the vendor documents each figure comes from in their ``sources``.

What NCCL itself expects of a platform (``results.analysis.nccl_model``, a port of NCCL's cost model) also needs the
GPU's generation (its per-architecture bandwidth caps, latencies and NVLink accounting), whether the GPUs
reach each other over NVLink or only PCIe, and whether the NVLink switches reduce in the switch (NVLink
SHARP, NVLS: NVSwitch systems from Hopper on).

Each field is written once, as plain data, in ``platform_fields``: ``Platform`` is built from it, with the rules
its fields must agree on (``PlatformRules``).
"""

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    computed_field,
    create_model,
    field_validator,
    model_validator,
)

from emuplan.workload.platform_fields import NAME_RULE, PLATFORM_FIELDS, PlatformField

NCCL_MODEL_SOURCE = (
    "NCCL cost model (github.com/NVIDIA/nccl @ 1fc949c, src/tuning/): the latencies, protocol factors and "
    "per-architecture caps of the expected curve (results/analysis/nccl_model.py)"
)


class PlatformError(ValueError):
    """A platform's figures that cannot describe hardware, or ranks that cannot run on it."""


def _text(max_length: int) -> Any:
    return Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=max_length)]


def _annotation(spec: PlatformField) -> Any:
    """The field's type as pydantic checks it. The name stays a plain string: ``_key`` words its rule."""
    if spec.type is list:
        return list[_text(spec.max_length)]
    if spec.choices:
        return Literal[tuple(spec.choices)]
    if spec.type is str and spec.pattern is None:
        return _text(spec.max_length)
    return spec.type


def _pydantic_field(spec: PlatformField) -> Any:
    """The field's default, bounds and help. A None default is filled in by ``_inferred``, never validated."""
    if spec.type is list:
        default = {"default_factory": list, "max_length": spec.max_items}
    elif spec.default is None:
        default = {"default": None, "validate_default": False}
    else:
        default = {"default": spec.default}
    return Field(
        **default,
        ge=spec.minimum,
        gt=spec.exclusive_minimum,
        le=spec.maximum,
        title=spec.title,
        description=spec.description,
        examples=[spec.example] if spec.example else None,
        json_schema_extra={"pattern": spec.pattern} if spec.pattern else None,
    )


class PlatformRules(BaseModel):
    """What a profile's fields must agree on, and what it infers when some are left out; ``Platform`` adds the
    fields themselves (``PLATFORM_FIELDS``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _inferred(cls, values: object) -> object:
        """The generation and NVLS of a profile that leaves them out (one stored before they existed)."""
        if not isinstance(values, dict):
            return values
        values = dict(values)
        if values.get("gpu_generation") is None:
            try:
                scale_up = float(values.get("scale_up_gb_s") or 0)
            except (TypeError, ValueError):
                return values  # the field's own validation names the bad figure
            values["gpu_generation"] = "blackwell" if scale_up >= 900 else "hopper" if scale_up >= 450 else "ampere"
        if values.get("nvls") is None:
            values["nvls"] = (
                values["gpu_generation"] in ("hopper", "blackwell")
                and values.get("scale_up_link", "nvlink") == "nvlink"
            )
        return values

    @field_validator("name", check_fields=False)
    @classmethod
    def _key(cls, name: str) -> str:
        if not re.fullmatch(PLATFORM_FIELDS["name"].pattern, name):
            raise PlatformError(f"{name!r} must be {NAME_RULE}")
        return name

    @model_validator(mode="after")
    def _consistent(self) -> "PlatformRules":
        if self.scale_up_domain_gpus % self.gpus_per_node:
            raise PlatformError(
                f"scale_up_domain_gpus: a scale-up domain is whole nodes; {self.scale_up_domain_gpus} GPUs is not a "
                f"multiple of {self.gpus_per_node} GPUs per node"
            )
        if self.nvls and (self.gpu_generation not in ("hopper", "blackwell") or self.scale_up_link != "nvlink"):
            raise PlatformError(
                f"nvls: NVLink SHARP needs Hopper or Blackwell GPUs on NVLink, not {self.gpu_generation} on "
                f"{self.scale_up_link}"
            )
        if self.fail_below_pct >= self.degraded_below_pct:
            raise PlatformError(
                f"fail_below_pct: {self.fail_below_pct:g} % must be below degraded_below_pct "
                f"({self.degraded_below_pct:g} %)"
            )
        return self

    @computed_field(description="Each GPU's share of its node's NICs, GB/s per direction.")
    @property
    def scale_out_gb_s(self) -> float:
        """Each GPU's share of its node's NICs, GB/s per direction: NICs × rate ÷ 8 bits ÷ GPUs per node."""
        return self.nics_per_node * self.nic_gbit_s / 8 / self.gpus_per_node


Platform = create_model(
    "Platform",
    __base__=PlatformRules,
    __doc__="One platform's fabric figures, per GPU per direction, with the documents they come from.",
    __module__=__name__,
    **{name: (_annotation(spec), _pydantic_field(spec)) for name, spec in PLATFORM_FIELDS.items()},
)


class Ceiling(BaseModel):
    """The slowest fabric level a collective's ranks span, and its bandwidth per GPU per direction."""

    level: Literal["scale-up", "scale-out"]
    fabric: str
    gb_s: float = Field(description="Bandwidth per GPU per direction, GB/s.")
    nodes: int
    domains: int = Field(description="Scale-up domains the ranks span.")


def ceiling_gbps(platform: Platform, ranks: int, ranks_per_node: int | None = None) -> Ceiling:
    """The level that bounds a collective over ``ranks`` GPUs placed ``ranks_per_node`` to a node (default: full
    nodes), nodes filling one scale-up domain before the next: inside one domain its NVLink bandwidth; across
    domains the slower of the scale-out share per GPU and (when ranks share a domain) NVLink."""
    per_node = platform.gpus_per_node if ranks_per_node is None else ranks_per_node
    if ranks < 1:
        raise PlatformError(f"ranks: {ranks} must be 1 or more")
    if not 1 <= per_node <= platform.gpus_per_node:
        raise PlatformError(
            f"ranks_per_node: {per_node} must be between 1 and the {platform.gpus_per_node} GPUs per node "
            f"of {platform.name}"
        )
    nodes = math.ceil(ranks / per_node)
    domains = math.ceil(nodes / (platform.scale_up_domain_gpus // platform.gpus_per_node))
    scale_up = Ceiling(
        level="scale-up", fabric=platform.scale_up_fabric, gb_s=platform.scale_up_gb_s, nodes=nodes, domains=domains
    )
    if domains == 1:
        return scale_up
    scale_out = Ceiling(
        level="scale-out", fabric=platform.scale_out_fabric, gb_s=platform.scale_out_gb_s, nodes=nodes, domains=domains
    )
    ranks_share_a_domain = ranks > domains
    return scale_up if ranks_share_a_domain and scale_up.gb_s < scale_out.gb_s else scale_out


def make_platform(values: dict) -> Platform:
    """A platform from plain values (a form, a stored row, the CLI's options); PlatformError naming each field
    that is wrong and why, as one line."""
    try:
        return Platform.model_validate(values)
    except ValidationError as error:
        problems = []
        for problem in error.errors():
            where = ".".join(map(str, problem["loc"]))
            message = problem["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {message}" if where else message)
        raise PlatformError("; ".join(problems)) from None


_DGX_BASEPOD = (
    "NVIDIA DGX BasePOD Reference Architecture, Core Components: DGX H100/H200 and DGX B200, four OSFP ports "
    "serving eight single-port ConnectX-7, up to 400 Gb/s InfiniBand/Ethernet — https://docs.nvidia.com/dgx-basepod/"
    "reference-architecture-infrastructure-foundation-enterprise-ai/latest/core-components.html"
)
_HOPPER_NVLINK = (
    "NVIDIA Hopper Architecture: fourth-generation NVLink, 900 GB/s bidirectional per GPU (450 GB/s per direction) "
    "in DGX and HGX servers — https://www.nvidia.com/en-us/data-center/technologies/hopper-architecture/"
)

BUILTIN_PLATFORMS: dict[str, Platform] = {
    platform.name: platform
    for platform in (
        Platform(
            name="a100-hdr",
            title="A100 SXM + HDR 200G",
            gpu_model="NVIDIA A100 SXM4",
            gpus_per_node=8,
            scale_up_domain_gpus=8,
            scale_up_fabric="NVLink 3",
            scale_up_gb_s=300,
            gpu_generation="ampere",
            nvls=False,
            scale_out_fabric="InfiniBand HDR 200G",
            nics_per_node=8,
            nic_gbit_s=200,
            sources=[
                "NVIDIA DGX A100 datasheet and 'Defining AI Innovation with NVIDIA DGX A100' (NVIDIA Technical Blog): "
                "8× A100 SXM4 over six NVSwitches, 600 GB/s bidirectional GPU-to-GPU (300 GB/s per direction); "
                "8× single-port ConnectX-6 HDR InfiniBand 200 Gb/s for the cluster — "
                "https://developer.nvidia.com/blog/defining-ai-innovation-with-dgx-a100/",
                "NVIDIA NVLink and NVSwitch: A100 has 12 third-generation NVLink links, 600 GB/s in total — "
                "https://www.nvidia.com/en-us/data-center/nvlink/",
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="h100-ndr",
            title="H100 SXM + NDR 400G",
            gpu_model="NVIDIA H100 SXM5",
            gpus_per_node=8,
            scale_up_domain_gpus=8,
            scale_up_fabric="NVLink 4",
            scale_up_gb_s=450,
            gpu_generation="hopper",
            nvls=True,
            scale_out_fabric="InfiniBand NDR 400G",
            nics_per_node=8,
            nic_gbit_s=400,
            sources=[
                "NVIDIA DGX H100 datasheet: 8× H100 SXM5, 18 NVLink 4 links per GPU, 900 GB/s bidirectional "
                "GPU-to-GPU (450 GB/s per direction); 8× ConnectX-7 400 Gb/s NDR InfiniBand — "
                "https://resources.nvidia.com/en-us-dgx-systems/ai-enterprise-dgx",
                _HOPPER_NVLINK,
                _DGX_BASEPOD,
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="h200-ndr",
            title="H200 SXM + NDR 400G",
            gpu_model="NVIDIA H200 SXM5",
            gpus_per_node=8,
            scale_up_domain_gpus=8,
            scale_up_fabric="NVLink 4",
            scale_up_gb_s=450,
            gpu_generation="hopper",
            nvls=True,
            scale_out_fabric="InfiniBand NDR 400G",
            nics_per_node=8,
            nic_gbit_s=400,
            sources=[
                "NVIDIA H200 Tensor Core GPU datasheet: NVLink 900 GB/s (bidirectional; 450 GB/s per direction) — "
                "https://www.nvidia.com/en-us/data-center/h200/",
                _HOPPER_NVLINK,
                _DGX_BASEPOD,
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="b200-400g",
            title="B200 + 400G",
            gpu_model="NVIDIA B200",
            gpus_per_node=8,
            scale_up_domain_gpus=8,
            scale_up_fabric="NVLink 5",
            scale_up_gb_s=900,
            gpu_generation="blackwell",
            nvls=True,
            scale_out_fabric="ConnectX-7 400G",
            nics_per_node=8,
            nic_gbit_s=400,
            sources=[
                "NVIDIA DGX B200 User Guide, Introduction to NVIDIA DGX B200 Systems: 8× B200, two NVLink 5 switches "
                "with 14.4 TB/s aggregate (8 × 1.8 TB/s bidirectional = 900 GB/s per GPU per direction); 4 OSFP ports "
                "for 8× single-port ConnectX-7, InfiniBand up to 400 Gb/s — "
                "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html",
                _DGX_BASEPOD,
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="b200-800g",
            title="B200 + 800G",
            gpu_model="NVIDIA B200",
            gpus_per_node=8,
            scale_up_domain_gpus=8,
            scale_up_fabric="NVLink 5",
            scale_up_gb_s=900,
            gpu_generation="blackwell",
            nvls=True,
            scale_out_fabric="ConnectX-8 800G",
            nics_per_node=8,
            nic_gbit_s=800,
            sources=[
                "NVIDIA DGX B200 User Guide, Introduction to NVIDIA DGX B200 Systems: 8× B200, NVLink 5 at 1.8 TB/s "
                "bidirectional per GPU (900 GB/s per direction) — "
                "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html",
                "NVIDIA ConnectX-8 SuperNIC User Manual, Introduction: InfiniBand and Ethernet at up to 800 Gb/s; an "
                "HGX B200 node with one ConnectX-8 per GPU (the DGX B200 ships ConnectX-7 at 400 Gb/s) — "
                "https://docs.nvidia.com/networking/display/connectx8supernic/introduction",
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="gb200-nvl72",
            title="GB200 NVL72 + 400G",
            gpu_model="NVIDIA GB200 (Blackwell)",
            gpus_per_node=4,
            scale_up_domain_gpus=72,
            scale_up_fabric="NVLink 5 (NVL72)",
            scale_up_gb_s=900,
            gpu_generation="blackwell",
            nvls=True,
            scale_out_fabric="ConnectX-7 400G",
            nics_per_node=4,
            nic_gbit_s=400,
            sources=[
                "NVIDIA DGX GB200 User Guide, Hardware: a rack is one 72-GPU NVLink domain of 18 compute trays "
                "(2 Grace CPUs and 4 Blackwell GPUs each) and 9 NVLink switch trays; each compute tray has 4× "
                "ConnectX-7 single-port 400G OSFP NICs for the cluster network (400 Gb/s per GPU) — "
                "https://docs.nvidia.com/dgx/dgxgb200-user-guide/hardware.html",
                "NVIDIA DGX GB200 User Guide, Networking: NVLink 5, 1.8 TB/s bidirectional per GPU (900 GB/s per "
                "direction); 72 × 1.8 TB/s = the 130 TB/s NVLink domain of the GB200 NVL72 — "
                "https://docs.nvidia.com/dgx/dgxgb200-user-guide/networking.html",
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="h100-a3-mega",
            title="H100 SXM + 8 × 200G TCPXO (GCP A3 Mega)",
            gpu_model="NVIDIA H100 SXM5",
            gpus_per_node=8,
            scale_up_domain_gpus=8,
            scale_up_fabric="NVLink 4",
            scale_up_gb_s=450,
            gpu_generation="hopper",
            nvls=True,
            scale_out_fabric="GPUDirect-TCPXO 200G",
            nics_per_node=8,
            nic_gbit_s=200,
            sources=[
                "Google Cloud, GPU machine types: a3-megagpu-8g, 8 × H100 80GB, 8 NICs of 200 Gbps for GPU traffic "
                "(GPUDirect-TCPXO, 1,600 Gbps in all) — https://cloud.google.com/compute/docs/gpus#a3-series",
                _HOPPER_NVLINK,
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="b300-roce",
            title="B300 SXM + 16 × 400G RoCE (OCI BM.GPU.B300.8)",
            gpu_model="NVIDIA B300 SXM6",
            gpus_per_node=8,
            scale_up_domain_gpus=8,
            scale_up_fabric="NVLink 5",
            scale_up_gb_s=900,
            gpu_generation="blackwell",
            nvls=True,
            scale_out_fabric="RoCEv2 400G",
            nics_per_node=16,
            nic_gbit_s=400,
            sources=[
                "Oracle OCI GPU quick-starts, nvidia/B300/README-B300.md (oracle-quickstart/oci-gpu-quickstarts): "
                "BM.GPU.B300.8, 8 × B300 over NVLink 5 (1.8 TB/s bidirectional per GPU, 900 GB/s per direction), "
                "8 × 2 × 400 Gb/s RoCE for the cluster network",
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="gb300-nvl72",
            title="GB300 NVL72 + 800G",
            gpu_model="NVIDIA GB300 (Blackwell Ultra)",
            gpus_per_node=4,
            scale_up_domain_gpus=72,
            scale_up_fabric="NVLink 5 (NVL72)",
            scale_up_gb_s=900,
            gpu_generation="blackwell",
            nvls=True,
            scale_out_fabric="ConnectX-8 800G",
            nics_per_node=4,
            nic_gbit_s=800,
            sources=[
                "NVIDIA GB300 NVL72: 72 Blackwell Ultra GPUs in one NVLink 5 domain, 130 TB/s (1.8 TB/s bidirectional "
                "per GPU); ConnectX-8 SuperNIC, 800 Gb/s per GPU — https://www.nvidia.com/en-us/data-center/gb300-nvl72/",
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="h100-nvl-pair",
            title="H100 NVL pairs + 200G",
            gpu_model="NVIDIA H100 NVL",
            gpus_per_node=2,
            scale_up_domain_gpus=2,
            scale_up_fabric="NVLink 4 bridge",
            scale_up_gb_s=300,
            gpu_generation="hopper",
            nvls=False,
            scale_out_fabric="Slingshot-200 / 200G",
            nics_per_node=2,
            nic_gbit_s=200,
            sources=[
                "NVIDIA H100 NVL product brief: PCIe Gen5 cards bridged in pairs by three NVLink bridges, 600 GB/s "
                "bidirectional (300 GB/s per direction); no NVSwitch, so no NVLink SHARP — "
                "https://www.nvidia.com/en-us/data-center/h100/",
                "HPE Slingshot-200 (Cassini-2) NIC: 200 Gb/s; one per GPU (nccl#2441's nodes)",
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="pcie-gen4-200g",
            title="PCIe Gen4 GPUs + 200G",
            gpu_model="PCIe Gen4 x16 GPU (A100 PCIe, RTX 4090)",
            gpus_per_node=8,
            scale_up_domain_gpus=8,
            scale_up_fabric="PCIe Gen4 x16",
            scale_up_gb_s=24,
            gpu_generation="ampere",
            scale_up_link="pcie",
            nvls=False,
            scale_out_fabric="200G (HDR InfiniBand or 200GbE)",
            nics_per_node=1,
            nic_gbit_s=200,
            sources=[
                "NCCL counts a PCIe Gen4 x16 link as 24 GB/s (src/graph/xml.h kvDictPciGen 16 GT/s = 120, × 16 lanes "
                "÷ 80); an Ada card (RTX 4090, sm89) is in NCCL's Ampere row",
                "NVIDIA ConnectX-6/ConnectX-7: 200 Gb/s HDR InfiniBand or 200GbE, one per node here",
                NCCL_MODEL_SOURCE,
            ],
        ),
        Platform(
            name="gb10-200g",
            title="GB10 (DGX Spark) + 200GbE",
            gpu_model="NVIDIA GB10",
            gpus_per_node=1,
            scale_up_domain_gpus=1,
            scale_up_fabric="NVLink-C2C (one GPU)",
            scale_up_gb_s=300,
            gpu_generation="blackwell",
            nvls=False,
            scale_out_fabric="ConnectX-7 200GbE",
            nics_per_node=1,
            nic_gbit_s=200,
            sources=[
                "NVIDIA DGX Spark: one GB10 superchip per system, ConnectX-7 SmartNIC with 200 Gb/s QSFP networking "
                "for a second Spark — https://www.nvidia.com/en-us/products/workstations/dgx-spark/",
                NCCL_MODEL_SOURCE,
            ],
        ),
    )
}
