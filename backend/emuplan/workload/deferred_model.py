"""The base of every pydantic model in ``emuplan.workload``: its validator is built on first use.

Pydantic builds a model's core schema, validator and serializer when the class is created unless
``defer_build`` says to wait for the first validation, dump or schema. Every ``emuplan`` command
imports the plan document's models (``plan``'s options are ``PlanRequest``'s fields), so building them
all up front cost every command about 40 ms; deferred, each pays only for the models it uses.
Fields, defaults and descriptions (``model_fields``) are there at class creation either way.
"""

from pydantic import BaseModel, ConfigDict


class DeferredModel(BaseModel):
    model_config = ConfigDict(defer_build=True)
