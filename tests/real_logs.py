"""The labelled corpus of real nccl-tests logs (``../shared/fixtures/real-logs``, its manifest.json and
README.md) and the built-in platform each ran on, with why: what the verdict tests and docs/verdicts.md
judge."""

import json
from dataclasses import dataclass

from paths import SHARED

REAL_LOGS = SHARED / "fixtures" / "real-logs"

# Each log's hardware as its source describes it (manifest.json's gpu and interconnect), on the built-in
# profile that describes it.
PLATFORM_OF = {
    "01": "a100-hdr",  # 8 × A100 SXM4 over NVSwitch
    "02": "h100-ndr",  # 8 × H100 SXM over NVSwitch, NVLS
    "03": "b300-roce",  # OCI BM.GPU.B300.8
    "05": "pcie-gen4-200g",  # 8 × RTX 4090 on PCIe only
    "06": "pcie-gen4-200g",
    "08": "h100-ndr",  # OCI H100: 16 × 200G RoCE, the same 400 GB/s per node as 8 × 400G NDR
    "09": "h100-ndr",
    "11": "h100-ndr",
    "12": "h100-ndr",
    "13": "h100-ndr",
    "17": "pcie-gen4-200g",  # A100 PCIe, one per node, one HDR 200G NIC
    "18": "h100-nvl-pair",
    "19": "h100-nvl-pair",
    "20": "gb10-200g",
    "21": "gb10-200g",
    "22": "b200-400g",  # GCP A4: 8 × B200, 8 RDMA NICs of 400G
    "23": "gb300-nvl72",
    "24": "gb300-nvl72",
}


@dataclass(frozen=True)
class RealLog:
    file: str
    label: str  # healthy, problem or unknown: what the source says
    gpus_per_node: int
    nodes: int
    platform: str
    source: str

    @property
    def path(self):
        return REAL_LOGS / self.file

    @property
    def ranks(self) -> int:
        return self.gpus_per_node * self.nodes


def real_logs() -> list[RealLog]:
    manifest = json.loads((REAL_LOGS / "manifest.json").read_text())
    return [
        RealLog(
            file=entry["file"],
            label=entry["label"],
            gpus_per_node=entry["gpus_per_node"],
            nodes=entry["nodes"],
            platform=PLATFORM_OF[entry["file"][:2]],
            source=entry["source"],
        )
        for entry in manifest
    ]
