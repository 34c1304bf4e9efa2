"""What the distribution carries besides the code: its license, in the repository and in the installed metadata.

The wheel itself is built by `.ci/run`'s environments (an editable install is a wheel too), so the metadata read here
is the one a wheel from `uv build` has.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_the_repository_and_the_installed_distribution_carry_the_mit_license():
    assert (ROOT / 'LICENSE').read_text().startswith('MIT License\n')
    metadata = importlib.metadata.metadata('pydantic-ai-append')
    assert (metadata['License-Expression'], metadata.get_all('License-File')) == ('MIT', ['LICENSE'])
    files = importlib.metadata.files('pydantic-ai-append') or []
    assert [file.name for file in files if file.name == 'LICENSE'] == ['LICENSE']
