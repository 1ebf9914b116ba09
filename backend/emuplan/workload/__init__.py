"""From a model definition to a collective workload: inventory, strategies, KCCB export, ideal time."""
