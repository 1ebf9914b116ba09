"""The base of every pydantic model in ``emuplan.workload``: its validator is built on first use.

Pydantic builds a model's core schema, validator and serializer when the class is created unless
``defer_build`` says to wait for the first validation, dump or schema. Importing the plan document
built them all, about 40 ms, for every command and server that imports it; deferred, each pays only
for the models it uses (a preset's plan never validates a PyTorch capture, ``emuplan runs`` no plan).
Fields, defaults and descriptions (``model_fields``) are there at class creation either way.
"""

from pydantic import BaseModel, ConfigDict


class DeferredModel(BaseModel):
    model_config = ConfigDict(defer_build=True)
