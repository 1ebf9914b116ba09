"""The GPUs whose peak times a trace's compute nodes. Kept free of heavy imports: the CLI's help reads it."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    key: str
    label: str
    peak_tflops: float  # dense bf16 tensor-core peak


GPUS = {
    gpu.key: gpu
    for gpu in (
        Gpu("h100-sxm", "NVIDIA H100 SXM", 989.0),
        Gpu("h200", "NVIDIA H200 SXM", 989.0),
        Gpu("a100", "NVIDIA A100 SXM", 312.0),
        Gpu("b200", "NVIDIA B200", 2250.0),
    )
}
DEFAULT_GPU = "h100-sxm"
DEFAULT_UTILISATION = 0.4
