"""Rules the suite keeps about itself (docs/testing.md, "Writing a test")."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_pytest_raises_names_what_the_message_says():
    """A ``pytest.raises`` without ``match=`` passes on any exception of the type, whatever
    raised it and whatever it says."""
    bare = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "raises" and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "pytest"
                    and not any(k.arg == "match" for k in node.keywords)):
                bare.append(f"{path.relative_to(TESTS.parent)}:{node.lineno}")
    assert bare == [], "pytest.raises without match=: " + ", ".join(bare)
