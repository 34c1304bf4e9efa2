"""Shared test set-up: telemetry goes nowhere, cassettes replay in full, no event loop is left open, property
tests have no deadline, and the durable engines' tests run only when asked for."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from typing import Any, cast

import logfire
import pytest
from hypothesis import settings
from logfire.testing import capfire

from . import wire

logfire.configure(send_to_logfire=False, console=False)

# Property tests judge what is generated, not how fast: on a shared 2-core machine running the suite in parallel,
# one example can take longer than Hypothesis's default deadline of 200 ms, which fails a correct test.
settings.register_profile('shared-machine', deadline=None)
settings.load_profile('shared-machine')

__all__ = ('capfire',)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        '--durable',
        action='store_true',
        help='run the tests marked `durable` (Temporal, DBOS); they need `uv sync --group durable`',
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The engines' tests take about as long as the rest of the suite on a 2-core machine, so they run as a step of
    # their own (`.ci/run`), not in every `uv run pytest`.
    if config.getoption('--durable'):
        return
    skip = pytest.mark.skip(reason='a durable engine test: run with `--durable -m durable`, see docs/durable.md')
    for item in items:
        if item.get_closest_marker('durable') is not None:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # `uv run pytest` lists no skip reasons (`-rs` would): the one a machine can fix is said here, once.
    reasons: list[str] = []
    for report in terminalreporter.stats.get('skipped', []):
        skipped: object = getattr(report, 'longrepr', None)
        if isinstance(skipped, tuple) and 'redis-server is not installed' in (reason := str(cast('Any', skipped)[2])):
            reasons.append(reason.removeprefix('Skipped: '))
    if reasons:
        terminalreporter.write_line(f'{len(reasons)} tests skipped: {reasons[0]}.')


@pytest.fixture
def anyio_backend() -> str:
    # One backend, so test ids (which name the cassettes) carry no backend suffix.
    return 'asyncio'


@pytest.fixture(scope='module')
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    # pytest-recording's default is a `cassettes/` directory beside each test file; keeping them all in one place
    # means a test module can move between test packages without its cassettes moving. Test module names are
    # unique across the packages (`test_suite_cassettes.py` checks), so no two modules share a directory.
    return str(wire.CASSETTES / request.path.stem)


@pytest.fixture
def vcr_config() -> dict[str, Any]:
    return wire.vcr_config()


@pytest.fixture(autouse=True)
def cassette_fully_played(vcr: wire.PlayableCassette | None) -> Iterator[None]:
    check = wire.CassetteCheck(vcr) if vcr is not None else None
    yield
    if check is not None:
        check.assert_all_played()


@pytest.fixture(autouse=True)
def close_event_loop_left_by_run_sync() -> Iterator[None]:
    # `agent.run_sync` leaves an event loop behind; collected later, during an async test, its `ResourceWarning`
    # fails the run even though every test passed.
    yield
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            loop = asyncio.get_event_loop_policy().get_event_loop()  # pyright: ignore[reportDeprecated]
    except RuntimeError:
        return
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)
