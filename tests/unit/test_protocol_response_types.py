"""The TypedDicts of responses (the package broker/protocol/responses) are the generator's output for today's
schemas."""

from __future__ import annotations

import ast
from pathlib import Path

from broker import handlers
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


def _handler_functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in sorted(Path(handlers.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((f"{path.name}:{node.lineno} {node.name}", node))
    return found


def test_every_handler_answers_with_the_typed_dict_of_its_response():
    """So a misspelt or missing field of an answer is a type checker's error, not a silent default."""
    untyped = []
    for where, fn in _handler_functions():
        registered = any(isinstance(d, ast.Call) and ast.unparse(d.func) == "handler" for d in fn.decorator_list)
        returns = ast.unparse(fn.returns) if fn.returns is not None else ""
        names = {n.id for n in ast.walk(fn.returns) if isinstance(n, ast.Name)} if fn.returns is not None else set()
        if registered and not names & set(responses.__all__):
            untyped.append(f"{where} -> {returns or '(unannotated)'}")
        elif "dict[str, Any]" in returns:
            untyped.append(f"{where} -> {returns}")
    assert not untyped, "answers built as dict[str, Any]:\n" + "\n".join(untyped)
