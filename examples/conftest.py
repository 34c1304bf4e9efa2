"""The repository's suite blocks the network (pytest-recording's `--block-network`); the examples' fake provider
listens on loopback, which is all they reach. A project of your own that copies an example needs none of this unless
it blocks the network too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Called with every item of the session, the tests' too: only the examples' are let through to loopback.
    for item in items:
        if item.path.is_relative_to(EXAMPLES):
            item.add_marker(pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1']))
