"""The project's size, held to one rule per folder: a module over 400 lines or a function over 60 is doing several jobs.

The rule covers every module of the package (the fake provider, `testing/fake_provider/`, among them) and the
benchmark. The append engine, the modules at the package's root, is held to 2,810 lines together, docstrings included
(2,500 until windows were opened by price, `_reopening` and its option: about 150 lines; 2,600 until a window a
compaction cut was kept; 2,650 until issue 38's fixes: lookalikes read as a model reads them, about 80 lines, and
Mistral's delivery, fallback models inside wrappers, MCP sampling, realtime sessions and tenants, about 70); the other
wings (`_shared/`, `_store/`, `_telemetry/`, `_wire/`, `_check/`, `guard/`, `testing/`) by the module and function
limits alone. Test files are held to 600 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / 'pydantic_ai_append'
HELD = [PACKAGE, ROOT / 'benchmarks']
"""The folders whose every module is held to the module and function limits."""


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def modules() -> list[Path]:
    return [path for folder in HELD for path in sorted(folder.rglob('*.py'))]


def test_the_append_engine_is_at_most_2810_lines():
    assert sum(lines(path) for path in PACKAGE.glob('*.py')) <= 2_810


def test_no_module_is_over_400_lines():
    assert [str(path.relative_to(ROOT)) for path in modules() if lines(path) > 400] == []


def test_no_function_is_over_60_lines():
    long: list[str] = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long.append(f'{path.relative_to(ROOT)}:{node.name} ({length} lines)')
    assert long == []


def test_no_test_file_is_over_600_lines():
    assert [path.name for path in sorted((ROOT / 'tests').rglob('*.py')) if lines(path) > 600] == []
