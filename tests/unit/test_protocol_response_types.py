"""The TypedDicts of responses (broker/protocol/responses.py) are the generator's output for today's schemas."""

from __future__ import annotations

from pathlib import Path

from broker.protocol import messages, responses, typed_gen


def test_the_checked_in_module_is_what_the_schemas_generate():
    checked_in = Path(responses.__file__).read_text()
    assert checked_in == typed_gen.source(), "regenerate: python -m broker.protocol.typed_gen > broker/protocol/responses.py"


def test_every_response_has_its_typed_dict_with_the_fields_of_all_its_versions():
    for schema in messages.RESPONSES.values():
        typed = getattr(responses, schema.name)
        assert set(typed.__annotations__) == {f.name for f in schema.fields}
        assert typed.__total__ is False  # a missing key is the field's default
    assert set(responses.FetchResponsePartitionData.__annotations__) >= {"error_code", "records", "current_leader"}
