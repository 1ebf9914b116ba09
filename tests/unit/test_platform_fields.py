"""A platform's fields are written once (``workload.platform_fields``): the model, the stored table, the options
of ``emuplan platforms add`` and ``edit`` and the page's form each carry every one, so a field added there and
missing anywhere fails here, saying where (the table's column and its migration are the only other files)."""

from emuplan.api.pages.platforms import FORM_INPUTS, PlatformForm
from emuplan.cli.platforms import FIGURE_OPTIONS
from emuplan.store.tables import StoredPlatform
from emuplan.workload.platform_fields import PLATFORM_FIELDS
from emuplan.workload.platforms import Platform

FIELDS = list(PLATFORM_FIELDS)


def test_every_field_is_in_the_model_the_table_the_cli_and_the_form() -> None:
    assert list(Platform.model_fields) == FIELDS
    stored = {column.name for column in StoredPlatform.__table__.columns} - {"id", "created_at", "updated_at"}
    assert stored == set(FIELDS)  # a new field needs its column (store/tables.py) and a migration adding it
    assert [option.name for option in FIGURE_OPTIONS] == FIELDS[1:]  # the name is the commands' argument
    assert [field.name for field in FORM_INPUTS] == list(PlatformForm.model_fields) == FIELDS


def test_the_form_asks_as_the_model_checks() -> None:
    inputs = {field.name: field for field in FORM_INPUTS}
    assert [name for name, field in inputs.items() if field.required] == [
        name for name, field in Platform.model_fields.items() if field.is_required()
    ]
    assert dict(inputs["nic_gbit_s"].attributes) == {"type": "number", "min": "0", "max": "1000000", "step": "any"}
    assert dict(inputs["fail_below_pct"].attributes)["placeholder"] == "50"  # the default a blank leaves
    assert inputs["gpu_generation"].options[0] == ("", "from the scale-up rate")
    assert inputs["nvls"].options == (("", "Hopper and Blackwell on NVLink"), ("true", "yes"), ("false", "no"))
