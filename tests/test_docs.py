"""Every code example in the docs runs, and prints what it says it prints.

The rule is the same for docstrings, the README and the pages in `docs/`: every ```python block runs, offline,
and the `#>` lines in it (`# >` once ruff has formatted it) are exactly what it prints. A block that can't run
that way isn't a ```python block. Examples that import `pydantic_ai_harness` run only where it is installed. The Markdown pages are also checked for links that go nowhere.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
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
from pydantic_ai_append import set_memory_limit
from pydantic_ai_append._shared.cache import memory_limit

ROOT = Path(__file__).parent.parent
README = ROOT / 'README.md'
PAGES = sorted((ROOT / 'docs').glob('*.md'))
MARKDOWN = [README, *PAGES]
CODE_BLOCK = re.compile(r'```python\n(.*?)```', re.DOTALL)
FENCE = re.compile(r'^```(\S*)\n(.*?)^```$', re.DOTALL | re.MULTILINE)
LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
README_WORD_LIMIT = 1_500

# Examples of `testing.fake_provider` run it on loopback, as a user's tests do; nothing else is reached.
loopback_only = pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])


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


def fenced_blocks(path: Path) -> list[tuple[int, str, str]]:
    """Each fenced block of a Markdown file: the line its fence opens on, its language and its code."""
    text = path.read_text()
    return [(text.count('\n', 0, match.start()) + 1, match.group(1), match.group(2)) for match in FENCE.finditer(text)]


def markdown_examples() -> list[tuple[str, str]]:
    return [
        (f'{path.relative_to(ROOT)}:{line}', code)
        for path in MARKDOWN
        for line, language, code in fenced_blocks(path)
        if language == 'python'
    ]


def expected_output(code: str) -> str:
    # `#>` as written; ruff's formatter turns it into `# >`.
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
    limit = memory_limit()
    try:
        # An example may set a warnings filter for the whole process, as a user would; here it lasts one example.
        with warnings.catch_warnings(), contextlib.redirect_stdout(output):
            exec(compile(textwrap.dedent(code), '<example>', 'exec'), module.__dict__)  # noqa: S102 (running the docs is the test)
    finally:
        # An example may set the memory limit for the whole process, as a user would; here it lasts one example.
        set_memory_limit(limit)
        del sys.modules[module.__name__]
    return output.getvalue()


@loopback_only
@pytest.mark.parametrize(('name', 'code'), docstring_examples(), ids=[name for name, _ in docstring_examples()])
def test_docstring_examples(name: str, code: str):
    assert run(code) == expected_output(code)


HARNESS_INSTALLED = importlib.util.find_spec('pydantic_ai_harness') is not None


@loopback_only
@pytest.mark.parametrize(('name', 'code'), markdown_examples(), ids=[name for name, _ in markdown_examples()])
def test_markdown_examples(name: str, code: str):
    # Harness pins `pydantic-ai-slim` exactly, so it is only in the harness environments (`.ci/harness-env`).
    if 'pydantic_ai_harness' in code and not HARNESS_INSTALLED:
        pytest.skip('needs pydantic-ai-harness, installed only in the harness environments')
    assert run(code) == expected_output(code)


def test_every_python_block_is_one_the_tests_run():
    # Only ```python blocks run, so code in a fence spelled differently would escape the rule.
    for path in MARKDOWN:
        for line, language, _ in fenced_blocks(path):
            assert language in {'python', 'bash', 'text'}, f'{path.relative_to(ROOT)}:{line}: fence {language!r}'


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings."""
    text = FENCE.sub('', path.read_text())
    headings = re.findall(r'^#+ (.+)$', text, re.MULTILINE)
    return {re.sub(r'[^\w\- ]', '', heading.lower()).replace(' ', '-') for heading in headings}


@pytest.mark.parametrize('path', MARKDOWN, ids=[str(path.relative_to(ROOT)) for path in MARKDOWN])
def test_relative_links_resolve(path: Path):
    for target in LINK.findall(FENCE.sub('', path.read_text())):
        if re.match(r'[a-z]+:', target):
            continue
        file, _, anchor = target.partition('#')
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f'{path.relative_to(ROOT)} links to {target}, which does not exist'
        if anchor:
            assert anchor in heading_anchors(linked), f'{path.relative_to(ROOT)} links to {target}: no such heading'


def test_the_index_lists_every_page():
    index = (ROOT / 'docs' / 'index.md').read_text()
    assert [page.name for page in PAGES if page.name != 'index.md' and f'({page.name})' not in index] == []


def test_the_readme_is_short_and_starts_with_the_install_and_the_commands_ci_runs():
    readme = README.read_text()
    assert len(readme.split()) <= README_WORD_LIMIT
    (_, install_fence, install), (_, commands_fence, commands) = fenced_blocks(README)[:2]
    assert (install_fence, commands_fence) == ('bash', 'bash')
    # `.ci/fresh-machine` runs the Install block's first line and every command below it as written, with Debian's own
    # externally managed Python. One route today: the package isn't on the index, so a clone is how it installs.
    today, published = install.splitlines()
    assert today.startswith("pip install './pydantic-ai-append[testing]' ")
    assert published.startswith('pip install pydantic-ai-append ')
    setup, example, suite = (line.partition('#')[0].rstrip() for line in commands.splitlines())
    # uv in the clone's own environment: `pip install` into the system's Python is refused where it is externally
    # managed.
    assert setup == 'python3 -m venv .venv && . .venv/bin/activate && pip install uv'
    assert example == 'uv run python examples/todo_state.py'
    # `.ci/run` runs the whole suite with the README's test command, as written, and the fresh-machine step.
    assert suite == 'uv run pytest'
    ci_run = (ROOT / '.ci' / 'run').read_text().splitlines()
    assert suite in ci_run
    assert 'bash .ci/fresh-machine' in ci_run
