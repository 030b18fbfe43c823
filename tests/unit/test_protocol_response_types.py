"""The TypedDicts of responses (the package broker/protocol/responses) are the generator's output for today's
schemas."""

from __future__ import annotations

from broker.protocol import messages, responses, typed_gen


def test_the_checked_in_package_is_what_the_schemas_generate():
    generated = typed_gen.sources()
    checked_in = {path.name: path.read_text() for path in typed_gen.PACKAGE.glob("*.py")}
    assert sorted(checked_in) == sorted(generated), "regenerate: python -m broker.protocol.typed_gen"
    for name, text in generated.items():
        assert checked_in[name] == text, f"{name} differs: regenerate: python -m broker.protocol.typed_gen"


def test_the_generator_writes_the_package_and_drops_a_family_that_is_gone(tmp_path):
    (tmp_path / "retired_family.py").write_text("")
    typed_gen.write(tmp_path)
    assert {path.name: path.read_text() for path in tmp_path.glob("*.py")} == typed_gen.sources()


def test_every_response_has_its_typed_dict_with_the_fields_of_all_its_versions():
    for schema in messages.RESPONSES.values():
        typed = getattr(responses, schema.name)
        assert set(typed.__annotations__) == {f.name for f in schema.fields}
        assert typed.__total__ is False  # a missing key is the field's default
    assert set(responses.FetchResponsePartitionData.__annotations__) >= {"error_code", "records", "current_leader"}
