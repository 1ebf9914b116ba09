"""Planning from model files: ``resolve_model`` reads .onnx, .safetensors and (in the sandbox) .py;
``emuplan plan`` puts the collectives PyTorch captured next to the analytic ones in framework mode."""

import json

import pytest
import torch
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.workload.pytorch_source import PytorchSourceError
from emuplan.workload.sources import UnknownModelError, resolve_model
from paths import MODELS

SEED_SOURCE = MODELS / "seed_classifier.py"
runner = CliRunner()


def plan_json(*args: str) -> dict:
    result = runner.invoke(app, ["plan", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def sizes(items: list[dict]) -> list[tuple[str, str, int]]:
    return [(item["op"], item["phase"], item["bytes_total"]) for item in items]


@pytest.mark.parametrize("file_name", ["seed_classifier.onnx", "seed_classifier.header.safetensors"])
def test_onnx_and_safetensors_files_plan_the_seed_numbers(file_name: str):
    assert resolve_model(str(MODELS / file_name)).parameter_bytes == 971048
    document = plan_json("--model", str(MODELS / file_name), "--mode", "tutorial", "--strategy", "pipeline")
    assert document["kccb"]["data_sizes"] == [2600, 33024, 131584, 803840]
    assert document["trials"] == 8


def test_unknown_suffixes_name_every_accepted_kind():
    with pytest.raises(UnknownModelError) as caught:
        resolve_model("model.pt")
    assert str(caught.value).endswith("or a file ending in .json, .onnx, .safetensors, .py")


def test_a_python_file_needs_its_class_and_input_shape():
    with pytest.raises(PytorchSourceError) as caught:
        resolve_model(str(SEED_SOURCE))
    assert str(caught.value) == "seed_classifier.py: a PyTorch source needs --model-class and --input-shape"
    result = runner.invoke(app, ["plan", "--model", str(SEED_SOURCE)])
    assert result.exit_code == 2
    assert "seed_classifier.py: a PyTorch source needs --model-class and --input-shape" in result.output


@pytest.mark.sandbox
def test_tensor_parallel_capture_agrees_with_the_analytic_plan_for_the_seed():
    document = plan_json(
        "--model", str(SEED_SOURCE), "--model-class", "Classifier", "--input-shape", "1,28,28",
        "--mode", "framework", "--strategy", "tensor", "--gpus", "4",
    )  # fmt: skip
    expected = [
        ("all_reduce", "forward", 4194304),
        ("all_reduce", "forward", 327680),
        ("all_reduce", "backward", 4194304),
    ]
    assert sizes(document["collectives"]) == expected
    assert sizes(document["captured"]) == expected
    assert {item["group_size"] for item in document["captured"]} == {4}
    assert document["capture_differences"] == []


@pytest.mark.sandbox
def test_capture_and_analytic_ddp_buckets_agree_for_an_explicit_cap():
    # torch 2.13 keeps the 1 MiB first bucket only for the default bucket_cap_mb; an explicit cap applies
    # to the first bucket too, and the analytic plan follows it.
    document = plan_json(
        "--model", str(MODELS / "deep_linear.py"), "--model-class", "DeepLinear", "--input-shape", "1024",
        "--mode", "framework", "--strategy", "data", "--bucket-cap-mb", "10",
    )  # fmt: skip
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(6)], torch.nn.Linear(1024, 10))
    reversed_parameters = list(reversed(list(model.parameters())))
    buckets, _ = torch.distributed._compute_bucket_assignment_by_size(reversed_parameters, [10 * 1024 * 1024])
    torch_sizes = [sum(reversed_parameters[i].numel() * 4 for i in bucket) for bucket in buckets]
    assert torch_sizes == [12636200, 12595200]
    assert sizes(document["captured"]) == [("all_reduce", "backward", size) for size in torch_sizes]
    assert sizes(document["collectives"]) == [("all_reduce", "backward", size) for size in torch_sizes]
    assert document["capture_differences"] == []


@pytest.mark.sandbox
def test_tutorial_mode_runs_no_capture():
    document = plan_json(
        "--model", str(SEED_SOURCE), "--model-class", "Classifier", "--input-shape", "1,28,28",
        "--mode", "tutorial", "--strategy", "data",
    )  # fmt: skip
    assert document["kccb"]["data_sizes"] == [971048]
    assert document["captured"] == []
