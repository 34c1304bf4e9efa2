"""What inline-snapshot says when it fills in the snapshot of the testing page's `prompt_wire` test, in a user's
project: "not able to format your code" where nothing tells it how to format, and nothing once the page's
`format-command` is set.

`pytester` runs the page's test in a session of its own, in a directory holding a user's `pyproject.toml` and none
of this repository's above it. The inner session starts from the outer one's inline-snapshot settings, this
repository's, until it reads a `pyproject.toml` of its own: each run here has one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

# Imported here once: pytester drops the modules a run imported, and Pydantic AI fails to be imported a second time.
import pydantic_ai  # noqa: F401  # pyright: ignore[reportUnusedImport]
import pytest

pytest_plugins = ['pytester']

PAGE = Path(__file__).parents[2] / 'docs' / 'testing-prompts.md'
FORMAT_COMMAND = "format-command = 'ruff format --stdin-filename {filename}'"
UNFORMATTED = 'inline-snapshot is not able to format your code.'


def create_snapshot(pytester: pytest.Pytester) -> tuple[str, str]:
    """Run the page's first example with `--inline-snapshot=create`: what it printed, and the test file it left."""
    page = PAGE.read_text()
    test = pytester.makepyfile(test_docs_page=re.findall(r'```python\n(.*?)```', page, re.DOTALL)[0])
    result = pytester.runpytest_inprocess('-p', 'no:cacheprovider', '--inline-snapshot=create')
    return result.stdout.str(), test.read_text()


def ruff_formatted(code: str) -> str:
    command = [str(Path(sys.executable).parent / 'ruff'), 'format', '--stdin-filename', 'test_docs_page.py']
    return subprocess.run(command, input=code, capture_output=True, text=True, check=True).stdout


# The page's test runs an agent against the fake provider on loopback, in this process.
@pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])
def test_the_pages_format_command_quiets_inline_snapshots_message(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    # inline-snapshot writes no snapshot in an xdist worker, and this session may run in one.
    monkeypatch.delenv('PYTEST_XDIST_WORKER', raising=False)
    monkeypatch.setitem(sys.modules, 'black', None)
    assert not any((directory / 'pyproject.toml').exists() for directory in pytester.path.parents)
    project = "[project]\nname = 'my-agent'\nversion = '0.1.0'\n"
    pytester.makepyprojecttoml(project)
    out, unformatted = create_snapshot(pytester)
    # Without black (it is not one of inline-snapshot's requirements), the snapshot is written as inline-snapshot
    # lays it out, and the message says so.
    assert UNFORMATTED in out
    assert '+ system: <context id="capability:todos:list">' in unformatted
    assert ruff_formatted(unformatted) != unformatted
    # The table the page shows, with ruff on the `PATH` (as `uv run` or an activated environment puts it).
    assert FORMAT_COMMAND in ' '.join(PAGE.read_text().split())
    pytester.makepyprojecttoml(f'{project}\n[tool.inline-snapshot]\n{FORMAT_COMMAND}\n')
    monkeypatch.setenv('PATH', str(Path(sys.executable).parent), prepend=os.pathsep)
    out, formatted = create_snapshot(pytester)
    assert (UNFORMATTED in out, 'Problems' in out) == (False, False)
    assert '+ system: <context id="capability:todos:list">' in formatted
    assert ruff_formatted(formatted) == formatted
