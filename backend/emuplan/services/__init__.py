"""Use cases above store/: each module orchestrates one (import a result, read a run, plan, compare...)."""
