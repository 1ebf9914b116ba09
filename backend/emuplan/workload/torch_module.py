"""Inventory of a real ``nn.Module``, read on torch's meta device: shapes only, no weights allocated."""

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from emuplan.workload.inventory import ActivationInfo, BufferInfo, ModelInventory, ParameterInfo, SampleSpec


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def inventory_from_module(module: nn.Module, name: str, source_kind: str, sample: SampleSpec) -> ModelInventory:
    """Parameters in registration order, buffers, each leaf module's output for one sample, and the
    order backward completes the gradients.

    ``module`` must live on the meta device; one forward and backward run on a meta tensor of batch 1,
    so activation shapes and the gradient order come from PyTorch itself while no memory is spent.
    """
    named = list(module.named_parameters())
    parameters = [
        ParameterInfo(name=n, shape=list(p.shape), dtype=_dtype_name(p.dtype), requires_grad=p.requires_grad)
        for n, p in named
    ]
    buffers = [BufferInfo(name=n, shape=list(b.shape), dtype=_dtype_name(b.dtype)) for n, b in module.named_buffers()]
    activations: list[ActivationInfo] = []
    gradient_order: list[str] = []

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
    # DDP's reducer hooks the same moment: a parameter's gradient has been accumulated.
    handles += [
        p.register_post_accumulate_grad_hook(lambda _p, n=n: gradient_order.append(n))
        for n, p in named
        if p.requires_grad
    ]
    try:
        output = module(torch.empty([1, *sample.shape], dtype=getattr(torch, sample.dtype), device="meta"))
        differentiable = [t.sum() for t in tree_leaves(output) if isinstance(t, torch.Tensor) and t.requires_grad]
        if differentiable:
            torch.stack(differentiable).sum().backward()
    finally:
        for handle in handles:
            handle.remove()
    if not parameters:
        raise ValueError(f"model {name!r} has no parameters")
    return ModelInventory(
        name=name,
        source_kind=source_kind,
        parameters=parameters,
        gradient_order=gradient_order,
        buffers=buffers,
        activations=activations,
        sample=sample,
    )
