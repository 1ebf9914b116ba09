"""ONNX graphs → inventory: initializers in first-use order, activations from shape inference."""

import importlib.util
import io
import warnings

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from emuplan.workload.onnx_source import OnnxError, read_onnx, read_onnx_bytes
from paths import MODELS

SEED_LAYERS = [("fc1", 784, 256), ("fc2", 256, 128), ("fc3", 128, 64), ("fc4", 64, 10)]


def seed_classifier_onnx(external_weights: bool = False) -> bytes:
    """The seeds' Classifier as torch.onnx.export lays it out: Flatten, Gemm(transB) + Relu, LogSoftmax."""
    nodes = [helper.make_node("Flatten", ["input"], ["flat"], name="/Flatten", axis=1)]
    initializers = []
    previous = "flat"
    for index, (module, fan_in, fan_out) in enumerate(SEED_LAYERS):
        weight = numpy_helper.from_array(np.zeros((fan_out, fan_in), dtype=np.float32), f"{module}.weight")
        bias = numpy_helper.from_array(np.zeros(fan_out, dtype=np.float32), f"{module}.bias")
        if external_weights:
            # Weights kept in a file next to the model: never opened, the dims are enough.
            weight.ClearField("raw_data")
            weight.data_location = TensorProto.EXTERNAL
            weight.external_data.add(key="location", value="weights.bin")
        initializers += [weight, bias]
        nodes.append(
            helper.make_node(
                "Gemm", [previous, weight.name, bias.name], [f"{module}_out"], name=f"/{module}/Gemm", transB=1
            )
        )
        previous = f"{module}_out"
        if index < len(SEED_LAYERS) - 1:
            nodes.append(helper.make_node("Relu", [previous], [f"{module}_relu"], name=f"/Relu_{index}"))
            previous = f"{module}_relu"
    nodes.append(helper.make_node("LogSoftmax", [previous], ["output"], name="/LogSoftmax", axis=1))
    graph = helper.make_graph(
        nodes,
        "classifier",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 28, 28])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 10])],
        initializer=list(reversed(initializers)),  # stored order must not decide parameter order
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_the_seed_classifier_from_onnx_matches_the_pytorch_inventory():
    inventory = read_onnx_bytes(seed_classifier_onnx(), "classifier", "classifier.onnx")
    assert [(p.name, p.shape, p.dtype) for p in inventory.parameters] == [
        ("fc1.weight", [256, 784], "float32"), ("fc1.bias", [256], "float32"),
        ("fc2.weight", [128, 256], "float32"), ("fc2.bias", [128], "float32"),
        ("fc3.weight", [64, 128], "float32"), ("fc3.bias", [64], "float32"),
        ("fc4.weight", [10, 64], "float32"), ("fc4.bias", [10], "float32"),
    ]  # fmt: skip
    assert inventory.parameter_bytes == 971048
    assert inventory.source_kind == "onnx"
    assert [(a.module, a.module_type, a.shape) for a in inventory.activations] == [
        ("/Flatten", "Flatten", [784]),
        ("fc1", "Gemm", [256]), ("/Relu_0", "Relu", [256]),
        ("fc2", "Gemm", [128]), ("/Relu_1", "Relu", [128]),
        ("fc3", "Gemm", [64]), ("/Relu_2", "Relu", [64]),
        ("fc4", "Gemm", [10]), ("/LogSoftmax", "LogSoftmax", [10]),
    ]  # fmt: skip
    assert (inventory.sample.shape, inventory.sample.dtype) == ([1, 28, 28], "float32")


def test_external_weights_are_never_opened(tmp_path):
    path = tmp_path / "classifier.onnx"
    path.write_bytes(seed_classifier_onnx(external_weights=True))
    assert not (tmp_path / "weights.bin").exists()
    inventory = read_onnx(path)
    assert inventory.name == "classifier"
    assert inventory.parameter_count == 242762


def test_integer_initializers_are_constants_not_parameters():
    shape = numpy_helper.from_array(np.array([-1, 4], dtype=np.int64), "shape")
    weight = numpy_helper.from_array(np.zeros((3, 4), dtype=np.float16), "proj.weight")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["flat"]),
         helper.make_node("MatMul", ["flat", "w_t"], ["y"]),
         helper.make_node("Transpose", ["proj.weight"], ["w_t"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["b", 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["b", 3])],
        initializer=[shape, weight],
    )  # fmt: skip
    inventory = read_onnx_bytes(helper.make_model(graph).SerializeToString(), "g", "g.onnx")
    assert [(p.name, p.shape, p.dtype) for p in inventory.parameters] == [("proj.weight", [3, 4], "float16")]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "model.onnx: the file is empty"),
        (b"\x08\x07\x12", "model.onnx: not a valid ONNX model"),
        (b"this is not protobuf at all", "model.onnx: not a valid ONNX model"),
        (
            onnx.ModelProto(ir_version=8).SerializeToString(),
            "model.onnx: not a valid ONNX model (the graph has no nodes)",
        ),
    ],
)
def test_invalid_onnx_is_rejected_with_the_file_name(data: bytes, message: str):
    with pytest.raises(OnnxError) as caught:
        read_onnx_bytes(data, "model", "model.onnx")
    assert str(caught.value).startswith(message)


def test_a_model_exported_by_torch_reads_like_the_module_itself():
    # torch 2.13's TorchScript exporter works offline (the default dynamo exporter needs onnxscript).
    spec = importlib.util.spec_from_file_location("seed_classifier", MODELS / "seed_classifier.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Classifier()
    exported = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            model, (torch.randn(2, 1, 28, 28),), exported, dynamo=False,
            input_names=["input"], dynamic_axes={"input": {0: "batch"}},
        )  # fmt: skip
    inventory = read_onnx_bytes(exported.getvalue(), "classifier", "classifier.onnx")
    assert [(p.name, p.shape) for p in inventory.parameters] == [
        (name, list(parameter.shape)) for name, parameter in model.named_parameters()
    ]
    gemms = [(a.module, a.shape) for a in inventory.activations if a.module_type == "Gemm"]
    assert gemms == [("fc1", [256]), ("fc2", [128]), ("fc3", [64]), ("fc4", [10])]
    assert inventory.sample.shape == [1, 28, 28]
