"""What a run's samples say once read: statistics (``stats``), stragglers, the verdict against NCCL's own model
(``verdict``, ``expected``, ``nccl_model``), the figures a page shows for chosen assumptions (``run_analysis``),
comparisons, trends, a plan's step cost and its match with what a training job sent."""
