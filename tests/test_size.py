"""The package's size, held to its limits: a module over 400 lines or a function over 60 is doing several jobs.

The append feature (everything but the package's surface, the guard, the testing helpers, the cassette checker, the
wire modules they share and the telemetry) is held to 2,480 lines, docstrings included; test files to 600. The
surface, `__init__`, is left out since it holds no logic: its names are listed for type checkers and for the import
on first use. (With it, the limit was 2,500, until a new window kept the prefix before a rewritten block.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / 'pydantic_ai_append'
SURFACE = {'__init__.py'}
"""The package's public names, imported on first use."""
CHECKER = {'__main__.py', '_cache_rules.py', '_cassettes.py', '_check.py', '_usage.py', '_verdicts.py'}
"""The cassette checker's modules."""
WIRE = {'_segments.py', '_conversation.py', '_transport.py', '_causes.py'}
"""The request bodies as cache-order segments, and why a prefix moved, which the guard and the testing helpers share
with the checker."""
TELEMETRY = {'_telemetry.py'}
"""The provider's verdict in tokens and dollars, read after each response: nothing of the window's logic."""
STORE = {'_store.py', '_sqlite_store.py', '_reattach.py'}
"""The record store and the re-attaching of its records, a concern of its own."""


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_the_append_feature_is_at_most_2480_lines():
    modules = [path for path in PACKAGE.glob('*.py') if path.name not in SURFACE | CHECKER | WIRE | TELEMETRY | STORE]
    assert sum(map(lines, modules)) <= 2_480


def test_no_module_is_over_400_lines_and_no_function_over_60():
    modules = sorted(PACKAGE.rglob('*.py'))
    assert [path.name for path in modules if lines(path) > 400] == []
    long = [
        f'{path.relative_to(ROOT)}:{node.name}'
        for path in modules
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > 60
    ]
    assert long == []


def test_no_test_file_is_over_600_lines():
    assert [path.name for path in sorted((ROOT / 'tests').rglob('*.py')) if lines(path) > 600] == []
