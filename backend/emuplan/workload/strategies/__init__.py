"""Collective traffic per parallelism: tutorial rules and what frameworks issue."""
