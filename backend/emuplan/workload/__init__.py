"""From a model definition to a collective workload: model sources → inventory → strategies →
collectives, the KCCB export, the ideal time, and the plan contract (``document.PlanDocument``).

Owns the shared vocabulary the layers above import: collective ops and the per-rank-piece rule
(``collectives``), dtypes and their byte sizes (``inventory.DTYPE_BYTES``), strategies, modes and the
planning options as plain data (``plan_options``), the plan document's types (``document``), and the
platform profiles a run ran on, with the bandwidth ceiling of a collective over them (``platforms``). May
import ``emuplan.sandbox`` (to run uploaded PyTorch source), nothing else of emuplan; never FastAPI or
the database.
"""
