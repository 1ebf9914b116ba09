"""ONNX models: weights from the graph's initializers, activations from ONNX shape inference.

The model is parsed with ``load_external_data=False``: weights stored outside the file are never
opened, their shapes come from the initializer's dims. Floating-point initializers are the model's
parameters (integer ones are shape and index constants), listed in the order the graph's nodes first
use them, which for exported models is forward (= registration) order. Each node's first output is
one activation; a node that uses a parameter ``fc1.weight`` is named after its module, ``fc1``, so
that stage boundaries line up with parameter names.
"""

import io
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto

from emuplan.workload.inventory import ActivationInfo, ModelInventory, ParameterInfo, SampleSpec

ONNX_DTYPES = {
    TensorProto.DOUBLE: "float64",
    TensorProto.FLOAT: "float32",
    TensorProto.FLOAT16: "float16",
    TensorProto.BFLOAT16: "bfloat16",
    TensorProto.FLOAT8E4M3FN: "float8_e4m3fn",
    TensorProto.FLOAT8E5M2: "float8_e5m2",
    TensorProto.INT64: "int64",
    TensorProto.INT32: "int32",
    TensorProto.INT16: "int16",
    TensorProto.INT8: "int8",
    TensorProto.UINT8: "uint8",
    TensorProto.BOOL: "bool",
}
FLOATING = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"}


class OnnxError(ValueError):
    """Bytes that are not an ONNX model, or a graph that cannot be read."""


def parse_onnx(data: bytes, file_name: str = "model.onnx") -> onnx.ModelProto:
    if not data:
        raise OnnxError(f"{file_name}: the file is empty")
    try:
        model = onnx.load(io.BytesIO(data), load_external_data=False)
    except (DecodeError, ValueError) as error:
        raise OnnxError(f"{file_name}: not a valid ONNX model ({error})") from None
    if not model.graph.node:
        raise OnnxError(f"{file_name}: not a valid ONNX model (the graph has no nodes)")
    return model


def _dtype(elem_type: int, where: str) -> str:
    try:
        return ONNX_DTYPES[elem_type]
    except KeyError:
        raise OnnxError(f"{where}: ONNX element type {TensorProto.DataType.Name(elem_type)} is not supported") from None


def _dims(value: onnx.ValueInfoProto) -> list[int | None]:
    return [dim.dim_value if dim.HasField("dim_value") else None for dim in value.type.tensor_type.shape.dim]


def _module_of(parameter_name: str) -> str:
    return parameter_name.rsplit(".", 1)[0] if "." in parameter_name else parameter_name


def inventory_from_onnx(model: onnx.ModelProto, name: str, file_name: str) -> ModelInventory:
    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    # (node, input slot) of each initializer's first use: a Gemm's weight comes before its bias.
    first_use: dict[str, tuple[int, int]] = {}
    for index, node in enumerate(graph.node):
        for slot, input_name in enumerate(node.input):
            if input_name in initializers:
                first_use.setdefault(input_name, (index, slot))
    unused = (len(graph.node), 0)
    ordered = sorted(initializers, key=lambda tensor_name: first_use.get(tensor_name, unused))
    parameters = []
    for tensor_name in ordered:
        tensor = initializers[tensor_name]
        dtype = _dtype(tensor.data_type, f"{file_name}: initializer {tensor_name!r}")
        if dtype in FLOATING:
            parameters.append(ParameterInfo(name=tensor_name, shape=list(tensor.dims), dtype=dtype))
    if not parameters:
        raise OnnxError(f"{file_name}: the graph has no floating-point initializers (weights)")

    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except (onnx.shape_inference.InferenceError, ValueError) as error:
        raise OnnxError(f"{file_name}: ONNX shape inference failed ({error})") from None
    values = {value.name: value for value in [*inferred.value_info, *inferred.output, *inferred.input]}

    activations = []
    for node in graph.node:
        value = values.get(node.output[0]) if node.output else None
        if value is None or not value.type.HasField("tensor_type"):
            continue
        dims = _dims(value)
        if len(dims) < 2 or any(size is None for size in dims[1:]):
            continue  # no batch dimension, or a size only known at run time
        weights = [input_name for input_name in node.input if input_name in initializers]
        module = _module_of(weights[0]) if weights else (node.name or node.output[0])
        activations.append(
            ActivationInfo(
                module=module,
                module_type=node.op_type,
                shape=dims[1:],
                dtype=_dtype(value.type.tensor_type.elem_type, f"{file_name}: output {node.output[0]!r}"),
            )
        )

    sample = None
    data_inputs = [value for value in graph.input if value.name not in initializers]
    if data_inputs and data_inputs[0].type.HasField("tensor_type"):
        dims = _dims(data_inputs[0])
        if len(dims) >= 2 and all(size is not None for size in dims[1:]):
            sample = SampleSpec(
                shape=dims[1:],
                dtype=_dtype(data_inputs[0].type.tensor_type.elem_type, f"{file_name}: input {data_inputs[0].name!r}"),
            )
    return ModelInventory(name=name, source_kind="onnx", parameters=parameters, activations=activations, sample=sample)


def read_onnx_bytes(data: bytes, name: str, file_name: str) -> ModelInventory:
    return inventory_from_onnx(parse_onnx(data, file_name), name, file_name)


def read_onnx(path: Path) -> ModelInventory:
    """``emuplan plan --model model.onnx``; weights kept in external files are never opened."""
    return read_onnx_bytes(path.read_bytes(), path.stem, path.name)
