"""How many KCCB trials a training run corresponds to: one per batch, per epoch."""

from emuplan.workload.document import PlanningError


def count_trials(dataset_size: int, batch_size: int, epochs: int, drop_last: bool = False) -> int:
    """ceil(N / B) × epochs, or floor(N / B) × epochs when the last partial batch is dropped."""
    for field, value in (("dataset_size", dataset_size), ("batch_size", batch_size), ("epochs", epochs)):
        if value < 1:
            raise PlanningError(f"{field}: must be at least 1, got {value}")
    batches = dataset_size // batch_size if drop_last else -(-dataset_size // batch_size)
    if batches == 0:
        raise PlanningError(
            f"batch_size: {batch_size} is larger than dataset_size {dataset_size}, and drop_last leaves no batch"
        )
    return batches * epochs
