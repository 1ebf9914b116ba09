"""Inventory of a real ``nn.Module``, read on torch's meta device: shapes only, no weights allocated."""

import torch
from torch import nn

from emuplan.workload.inventory import ActivationInfo, ModelInventory, ParameterInfo, SampleSpec


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def inventory_from_module(module: nn.Module, name: str, source_kind: str, sample: SampleSpec) -> ModelInventory:
    """Parameters in registration order and each leaf module's output for one sample.

    ``module`` must live on the meta device; its forward runs on a meta tensor of batch 1, so
    activation shapes come from PyTorch itself while no memory is spent on data.
    """
    parameters = [
        ParameterInfo(name=param_name, shape=list(param.shape), dtype=_dtype_name(param.dtype))
        for param_name, param in module.named_parameters()
    ]
    activations: list[ActivationInfo] = []

    def record(module_name: str):
        def hook(leaf: nn.Module, _inputs, output) -> None:
            if isinstance(output, torch.Tensor):
                activations.append(
                    ActivationInfo(
                        module=module_name,
                        module_type=type(leaf).__name__,
                        shape=list(output.shape[1:]),
                        dtype=_dtype_name(output.dtype),
                    )
                )

        return hook

    handles = [
        leaf.register_forward_hook(record(leaf_name))
        for leaf_name, leaf in module.named_modules()
        if leaf_name and not any(True for _ in leaf.children())
    ]
    try:
        with torch.no_grad():
            module(torch.empty([1, *sample.shape], dtype=getattr(torch, sample.dtype), device="meta"))
    finally:
        for handle in handles:
            handle.remove()
    if not parameters:
        raise ValueError(f"model {name!r} has no parameters")
    return ModelInventory(
        name=name, source_kind=source_kind, parameters=parameters, activations=activations, sample=sample
    )
