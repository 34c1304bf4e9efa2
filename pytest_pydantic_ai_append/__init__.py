"""The pytest plugin of `pydantic-ai-append`: the `prompt_wire` fixture, for testing what an agent sends.

pytest imports this module at start-up in every suite the package is installed in (it is registered through the
`pytest11` entry point), so it defines fixtures only and imports nothing of the package until a test asks for one:
a suite that doesn't use it pays for nothing, and the package is imported after coverage measurement starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pydantic_ai_append.testing import PromptWire

__all__ = ('prompt_wire',)


@pytest.fixture
def prompt_wire() -> Iterator[PromptWire]:
    """A [`PromptWire`][pydantic_ai_append.testing.PromptWire]: hand its `http_client()` to your model's provider,
    then snapshot its `transcript()` and call its `assert_prefix_stable()`. Its clients are closed at teardown.
    """
    from pydantic_ai_append.testing import PromptWire

    wire = PromptWire()
    yield wire
    wire.close()
