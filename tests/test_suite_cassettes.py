"""The cassette infrastructure of `tests/wire.py`: the check that a test played its whole cassette, the recorded
addresses that lose their loopback port, and one cassette directory per test module.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from inline_snapshot import snapshot

from .wire import CASSETTES, CassetteCheck, loopback_as_fake_host


class StubCassette:
    def __init__(self, size: int, played: dict[int, int], record_mode: str = 'none') -> None:
        self.play_counts = played
        self.record_mode = record_mode
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_cassette_check_fails_on_unplayed_interactions():
    cassette = StubCassette(3, {})
    check = CassetteCheck(cassette)
    cassette.play_counts.update({0: 1, 2: 1})
    with pytest.raises(AssertionError, match=r'cassette interactions \[1\] of 3 were not played'):
        check.assert_all_played()
    cassette.play_counts[1] = 1
    check.assert_all_played()


def test_cassette_check_ignores_new_recordings_and_all_mode():
    recording = StubCassette(0, {})
    check = CassetteCheck(recording)
    recording.size = 2  # what vcrpy records during the test
    check.assert_all_played()
    CassetteCheck(StubCassette(2, {}, record_mode='all')).assert_all_played()


@dataclass
class RecordedRequestStub:
    uri: str


def test_recorded_loopback_uris_lose_their_port():
    rewritten = [
        loopback_as_fake_host(RecordedRequestStub(uri)).uri
        for uri in (
            'http://127.0.0.1:41234/v1/messages?beta=true',
            'http://localhost:8000/v1',
            'https://api.openai.com/v1',
        )
    ]
    assert rewritten == snapshot(
        [
            'http://fake-provider.invalid/v1/messages?beta=true',
            'http://fake-provider.invalid/v1',
            'https://api.openai.com/v1',
        ]
    )


def test_test_module_names_are_unique():
    # `conftest.py` finds a module's cassettes by its name alone, so two modules of one name would share them.
    tests = Path(__file__).parent
    names = sorted(path.stem for path in tests.rglob('test_*.py'))
    assert [name for name in names if names.count(name) > 1] == []


def test_every_cassette_directory_belongs_to_a_test_module():
    # A directory left behind by a renamed module would otherwise go unnoticed, since nothing replays it.
    tests = Path(__file__).parent
    modules = {path.stem for path in tests.rglob('test_*.py')}
    assert sorted(path.name for path in CASSETTES.iterdir() if path.name not in modules) == []
