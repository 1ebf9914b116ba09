"""emuplan: plan collective-communication emulations (KCCB) and analyse their results."""

__version__ = "0.1.0"
