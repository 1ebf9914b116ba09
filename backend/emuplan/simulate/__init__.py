"""Simulate a plan's training step with ASTRA-sim, an external tool the user builds (``EMUPLAN_ASTRA_SIM`` points
at its binary; the project never copies it).

``astra_sim`` derives the network from the plan's layout and link figures, runs the binary on a plan's Chakra
traces in a temporary folder within a wall-time bound, and reads each rank's simulated step time, compute and
exposed communication from what it prints. Imports neither FastAPI nor the database: ``services.simulations``
feeds it a stored plan's traces.
"""
