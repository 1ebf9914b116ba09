"""What every source must read from the seeds' Classifier (784-256-128-64-10, fp32), whatever its format."""

from emuplan.workload.inventory import ModelInventory

SEED_PARAMETERS = [
    ("fc1.weight", [256, 784]), ("fc1.bias", [256]),
    ("fc2.weight", [128, 256]), ("fc2.bias", [128]),
    ("fc3.weight", [64, 128]), ("fc3.bias", [64]),
    ("fc4.weight", [10, 64]), ("fc4.bias", [10]),
]  # fmt: skip
SEED_LAYER_OUTPUTS = [("fc1", [256]), ("fc2", [128]), ("fc3", [64]), ("fc4", [10])]


def assert_is_the_seed_classifier(inventory: ModelInventory) -> None:
    """Parameters in registration order, 242,762 of them in 971,048 bytes, layer outputs per sample."""
    assert [(p.name, p.shape) for p in inventory.parameters] == SEED_PARAMETERS
    assert inventory.parameter_count == 242762
    assert inventory.parameter_bytes == 971048
    assert [(a.module, a.shape) for a in inventory.activations] == SEED_LAYER_OUTPUTS
    assert inventory.sample.shape == [1, 28, 28]
