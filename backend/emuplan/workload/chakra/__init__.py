"""A plan's training step as MLCommons Chakra execution traces: one ``.<rank>.et`` file per rank and
the communicator groups, for ASTRA-sim and Keysight's ASTRA-sim service.

``schedule`` builds each rank's dependency graph from the plan; ``bundle`` encodes it with the module
protoc generated from ``et_def.proto`` (imported only there, so planning never loads protobuf).
"""
