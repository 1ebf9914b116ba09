"""What every model source produces and every strategy consumes: the model's inventory.

A source (preset, HuggingFace config.json, safetensors header, ONNX graph, PyTorch source run in the
sandbox) only has to say which parameters the model has, in registration order, and, where it can,
which activations its layers produce for one sample. The strategies in this package turn that into
collectives. Nothing here holds tensor data: shapes and dtypes only.
"""

from math import prod
from typing import Annotated, Literal

from pydantic import Field, model_validator

from emuplan.workload.deferred_model import DeferredModel

DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}


# Sizes travel as int64 (KCCB data sizes, stored byte counts): nothing in an inventory may need more.
INT64_MAX = 2**63 - 1
# Inventories also come back from the model sandbox, where model code can write them: every number
# and name is bounded so that a forged one is refused here rather than failing somewhere later.
Dimension = Annotated[int, Field(ge=0, le=INT64_MAX)]
Count = Annotated[int, Field(ge=1, le=INT64_MAX)]  # heads, layers, widths, vocabulary: zero means nothing
Name = Annotated[str, Field(max_length=1000)]
Dtype = Literal[tuple(DTYPE_BYTES)]


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}") from None


class ParameterInfo(DeferredModel):
    """One trainable tensor, e.g. ``fc1.weight`` of shape [256, 784]."""

    name: Name
    shape: list[Dimension] = Field(max_length=64)
    dtype: Dtype = "float32"
    requires_grad: bool = True  # False: frozen, no gradient, so no data-parallel gradient traffic

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * dtype_bytes(self.dtype)


class BufferInfo(DeferredModel):
    """A module buffer (BatchNorm's running statistics, a rotary embedding's frequencies): not trained,
    but DDP broadcasts every buffer from rank 0 before each forward."""

    name: Name
    shape: list[Dimension] = Field(max_length=64)
    dtype: Dtype = "float32"

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * dtype_bytes(self.dtype)


class ActivationInfo(DeferredModel):
    """The output of one leaf module for ONE sample (the batch dimension is left out)."""

    module: Name
    module_type: Name = ""
    shape: list[Dimension] = Field(max_length=64)
    dtype: Dtype = "float32"

    def nbytes(self, batch: int = 1) -> int:
        return batch * prod(self.shape) * dtype_bytes(self.dtype)


class SampleSpec(DeferredModel):
    """One training sample as the model's forward sees it, and its label."""

    shape: list[Dimension] = Field(max_length=64)
    dtype: Dtype = "float32"
    label_shape: list[Dimension] = Field(default_factory=list, max_length=64)
    label_dtype: Dtype = "int64"


class ExpertShape(DeferredModel):
    """A mixture-of-experts feed-forward block: routed experts, shared experts, and the layers that have one."""

    num_experts: Count  # routed experts per MoE layer
    experts_per_token: Count  # top-k: experts each token is routed to
    intermediate_size: Count  # one routed expert's
    shared_intermediate_size: Dimension = 0  # the shared expert MLP's (0: none)
    layers: list[Dimension]  # indices of the layers whose MLP is a mixture of experts


class LatentAttention(DeferredModel):
    """DeepSeek's multi-head latent attention (MLA): queries and keys/values through low-rank projections."""

    q_lora_rank: Count | None  # None: a plain q_proj
    kv_lora_rank: Count
    qk_nope_head_dim: Count
    qk_rope_head_dim: Count
    v_head_dim: Count


class TransformerShape(DeferredModel):
    """The numbers that decide a decoder-only transformer's parallel traffic."""

    family: str  # a model_type of hf_config.FAMILIES
    hidden_size: Count
    num_layers: Count
    num_attention_heads: Count
    num_key_value_heads: Count
    intermediate_size: Count
    vocab_size: Count
    max_position_embeddings: Count
    tie_word_embeddings: bool
    head_dim: Count | None = None  # None: hidden_size / num_attention_heads
    qkv_bias: bool = False
    output_bias: bool = False  # attention output projection
    mlp_bias: bool = False
    qk_norm: bool = False  # Qwen3: RMSNorm over each head's queries and keys
    experts: ExpertShape | None = None  # None: every layer's MLP is dense
    latent_attention: LatentAttention | None = None

    @property
    def attention_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def learned_position_embeddings(self) -> bool:
        """Learned absolute position embeddings (GPT-2's wpe); the other families rotate queries and keys."""
        return self.family == "gpt2"

    @model_validator(mode="after")
    def _experts_fit_the_model(self) -> "TransformerShape":
        if self.experts is None:
            return self
        if self.experts.experts_per_token > self.experts.num_experts:
            raise ValueError(
                f"{self.experts.experts_per_token} experts per token, more than the {self.experts.num_experts} experts"
            )
        beyond = [layer for layer in self.experts.layers if layer >= self.num_layers]
        if beyond:
            raise ValueError(f"expert layer {beyond[0]} is beyond the model's {self.num_layers} layers")
        return self


class ModelInventory(DeferredModel):
    name: Name
    source_kind: Name  # preset | hf_config | safetensors | onnx | pytorch
    parameters: list[ParameterInfo]  # in registration order, as model.parameters() yields them
    # Parameter names in the order backward completes their gradients (DDP's bucket order after
    # iteration 0); empty when unknown, and reverse registration order is assumed.
    gradient_order: list[Name] = Field(default_factory=list)
    buffers: list[BufferInfo] = Field(default_factory=list)  # in registration order
    activations: list[ActivationInfo] = Field(default_factory=list)  # in forward execution order
    sample: SampleSpec | None = None
    transformer: TransformerShape | None = None

    @property
    def parameter_count(self) -> int:
        return sum(p.numel for p in self.parameters)

    @property
    def parameter_bytes(self) -> int:
        return sum(p.nbytes for p in self.parameters)

    def gradient_ready_parameters(self) -> list[ParameterInfo]:
        """Trainable parameters in the order backward completes their gradients.

        ``gradient_order`` where the source knows it; parameters it does not name (never reached by
        backward, or a source without an execution order) follow in reverse registration order.
        """
        trainable = {p.name: p for p in self.parameters if p.requires_grad}
        ordered = [trainable.pop(name) for name in self.gradient_order if name in trainable]
        return ordered + list(reversed(trainable.values()))

    def unused_parameters(self) -> list[ParameterInfo]:
        """Trainable parameters the recorded backward gave no gradient (not used in forward); [] when the
        source records no gradient order."""
        if not self.gradient_order:
            return []
        ready = set(self.gradient_order)
        return [p for p in self.parameters if p.requires_grad and p.name not in ready]

    @model_validator(mode="after")
    def _sizes_fit_in_int64(self) -> "ModelInventory":
        if self.parameter_bytes > INT64_MAX:
            raise ValueError(
                f"the parameters take {self.parameter_bytes} bytes, more than the 2^63 − 1 a KCCB data size can hold"
            )
        for activation in self.activations:
            if activation.nbytes() > INT64_MAX:
                raise ValueError(
                    f"the activation of {activation.module!r} takes {activation.nbytes()} bytes per sample, more "
                    "than the 2^63 − 1 a KCCB data size can hold"
                )
        buffer_bytes = sum(buffer.nbytes for buffer in self.buffers)
        if buffer_bytes > INT64_MAX:
            raise ValueError(f"the buffers take {buffer_bytes} bytes, more than the 2^63 − 1 a KCCB data size can hold")
        return self
