"""What the wire tests share around the package's checker: cassette settings, location and the full-play check.

The checker itself, and the capturing HTTP client, are public in `pydantic_ai_append.testing`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    'CASSETTES',
    'FAKE_HOST',
    'CassetteCheck',
    'PlayableCassette',
    'RecordedRequest',
    'loopback_as_fake_host',
    'vcr_config',
]


CASSETTES = Path(__file__).parent / 'cassettes'
"""Where every test's cassettes are: in a directory named after its module, wherever the module is."""


class RecordedRequest(Protocol):
    """The part of a vcrpy `Request` that `loopback_as_fake_host` rewrites."""

    uri: str


_LOOPBACK = re.compile(r'^(https?)://(?:127\.0\.0\.1|localhost|\[::1\]):\d+')

FAKE_HOST = 'fake-provider.invalid'
"""What a recorded loopback address becomes; `.invalid` can never resolve, so a replay can't reach it."""


def loopback_as_fake_host(request: RecordedRequest) -> RecordedRequest:
    """Replace a loopback address and port in a request's URI with `FAKE_HOST`, for vcrpy's `before_record_request`.

    The fake provider gets a new port every run; without this, every recording would change every URI.

    Args:
        request: The request about to be recorded (vcrpy passes a copy).

    Returns:
        The same request, rewritten.
    """
    request.uri = _LOOPBACK.sub(rf'\1://{FAKE_HOST}', request.uri)
    return request


def vcr_config() -> dict[str, Any]:
    """The pytest-recording settings for wire tests: return this from the `vcr_config` fixture.

    Replays match on method and path only: ports differ between runs, and bodies differ between Pydantic AI
    releases, so responses are replayed in order per path and the prefix checker judges the bodies instead.

    Returns:
        Keyword arguments for `vcr.use_cassette`.
    """
    return {
        'match_on': ['method', 'path'],
        # The fake provider takes any key, but a cassette should never hold one, even a dummy. `host` and
        # `traceparent` change every run, and would make every re-recording a diff.
        'filter_headers': ['authorization', 'x-api-key', 'host', 'traceparent'],
        'before_record_request': loopback_as_fake_host,
    }


class PlayableCassette(Protocol):
    """The parts of a vcrpy `Cassette` that `CassetteCheck` reads (vcrpy ships no type information)."""

    @property
    def play_counts(self) -> Mapping[int, int]: ...

    @property
    def record_mode(self) -> str: ...

    def __len__(self) -> int: ...


class CassetteCheck:
    """Checks that a test played every interaction its cassette held when the test started.

    A cassette with interactions left over means the code under test made fewer requests than were recorded,
    which would go unnoticed otherwise. Interactions recorded by this run (`once` on a new cassette,
    `new_episodes`) aren't counted, and in `all` mode nothing is replayed, so nothing is checked.

    Example:
        ```python
        @pytest.fixture(autouse=True)
        def cassette_fully_played(vcr: PlayableCassette | None) -> Iterator[None]:
            check = CassetteCheck(vcr) if vcr is not None else None
            yield
            if check is not None:
                check.assert_all_played()
        ```
    """

    def __init__(self, cassette: PlayableCassette) -> None:
        """Note how many interactions the cassette holds before the test runs.

        Args:
            cassette: The cassette, as pytest-recording's `vcr` fixture yields it.
        """
        self._cassette = cassette
        self._loaded = len(cassette)

    def assert_all_played(self) -> None:
        """Assert that every interaction loaded from the cassette was played.

        Raises:
            AssertionError: Listing the indices of the interactions not played.
        """
        if self._cassette.record_mode == 'all':
            return
        unplayed = [index for index in range(self._loaded) if self._cassette.play_counts.get(index, 0) == 0]
        if unplayed:
            raise AssertionError(
                f'cassette interactions {unplayed} of {self._loaded} were not played: the test made fewer requests '
                f'than were recorded; re-record it with --record-mode=rewrite if that is intended'
            )
