"""The JSON Schema of a grammar file (``grammars/schema.json``, for editors), from the pydantic model.

Apart from :mod:`acceptmon.parse.grammar` because it reads that module's source (the attribute
docstrings are the descriptions), which no command needs.
"""

from __future__ import annotations

from typing import Any

from acceptmon.parse.grammar import GrammarFile


def grammar_schema() -> dict[str, Any]:
    """JSON Schema of a grammar file (``grammars/schema.json``, for editors; a test keeps it current)."""
    schema = GrammarFile.model_json_schema()
    for name, doc in _attribute_docstrings(GrammarFile).items():
        schema["properties"][name]["description"] = doc
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "acceptmon grammar file"
    return schema


def _attribute_docstrings(cls: type) -> dict[str, str]:
    """The docstring under each annotated attribute of a class, by attribute name."""
    import ast
    import inspect
    import textwrap

    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(body, ast.ClassDef)
    docs = {}
    for node, after in zip(body.body, body.body[1:], strict=False):
        text = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(text, str):
            docs[node.target.id] = inspect.cleandoc(text)
    return docs
