"""Every code example in the docs runs, and prints what it says it prints.

Examples in docstrings and the README mark expected output with `#>` lines under the `print` that makes it.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import pkgutil
import re
import sys
import textwrap
import types
import warnings
from pathlib import Path

import pytest

import pydantic_ai_append

ROOT = Path(__file__).parent.parent
CODE_BLOCK = re.compile(r'```python\n(.*?)```', re.DOTALL)


def package_modules() -> list[types.ModuleType]:
    names = [info.name for info in pkgutil.walk_packages(pydantic_ai_append.__path__, 'pydantic_ai_append.')]
    return [pydantic_ai_append, *(importlib.import_module(name) for name in sorted(names))]


def docstring_examples() -> list[tuple[str, str]]:
    examples: list[tuple[str, str]] = []
    seen: set[int] = set()
    for module in package_modules():
        objects = [module, *(value for _, value in inspect.getmembers(module))]
        for value in objects:
            doc = (
                inspect.getdoc(value)
                if inspect.ismodule(value) or inspect.isclass(value) or inspect.isfunction(value)
                else None
            )
            if (
                not doc
                or id(value) in seen
                or getattr(value, '__module__', module.__name__).split('.')[0] != 'pydantic_ai_append'
            ):
                continue
            seen.add(id(value))
            for index, block in enumerate(CODE_BLOCK.findall(doc)):
                examples.append((f'{getattr(value, "__qualname__", getattr(value, "__name__", "?"))}[{index}]', block))
    return examples


def expected_output(code: str) -> str:
    # `#>` in docstrings; in the README, where ruff formats code blocks, it becomes `# >`.
    lines = [line.strip() for line in code.splitlines()]
    return ''.join(
        line.removeprefix('# >').removeprefix('#>').removeprefix(' ') + '\n'
        for line in lines
        if line.startswith(('#>', '# >'))
    )


def run(code: str) -> str:
    # A real module, so that dataclasses and type hints defined by the example resolve.
    module = types.ModuleType('docs_example')
    sys.modules[module.__name__] = module
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output):
            exec(compile(textwrap.dedent(code), '<example>', 'exec'), module.__dict__)  # noqa: S102 (running the docs is the test)
    finally:
        del sys.modules[module.__name__]
    return output.getvalue()


@pytest.mark.parametrize(('name', 'code'), docstring_examples(), ids=[name for name, _ in docstring_examples()])
def test_docstring_examples(name: str, code: str):
    assert run(code) == expected_output(code)


def test_readme_usage_example_sends_the_prefix_it_shows(monkeypatch: pytest.MonkeyPatch):
    from pydantic_ai.models.test import TestModel

    monkeypatch.setenv('OPENAI_API_KEY', 'not-used')
    readme = (ROOT / 'README.md').read_text()
    [usage] = [block for block in CODE_BLOCK.findall(readme) if 'AppendInstructions' in block]
    shown = readme.split('The first request of a conversation is sent with:\n\n```\n', 1)[1].split('\n```', 1)[0]
    module = types.ModuleType('readme_usage')
    sys.modules[module.__name__] = module
    try:
        exec(compile(usage, '<readme>', 'exec'), module.__dict__)  # noqa: S102 (running the docs is the test)
        agent, deps = module.agent, module.Deps(todos=['write tests'])
        with agent.override(model=TestModel()):
            result = agent.run_sync('What is next?', deps=deps)
    finally:
        del sys.modules[module.__name__]
    assert result.all_messages()[0].instructions == shown


def test_readme_wire_verifier_examples_run():
    readme = (ROOT / 'README.md').read_text()
    section = readme.split('### Verifying what is sent\n', 1)[1].split('\n## ', 1)[0]
    blocks = CODE_BLOCK.findall(section)
    assert len(blocks) == 3
    # The last one silences a warning class for the whole process; here, only inside this test.
    with warnings.catch_warnings():
        for block in blocks:
            assert run(block) == ''


def test_readme_guard_example_prints_what_it_shows():
    readme = (ROOT / 'README.md').read_text()
    section = readme.split('## The prefix guard\n', 1)[1].split('\n### Verifying what is sent', 1)[0]
    [example] = CODE_BLOCK.findall(section)
    assert run(example) == expected_output(example)
