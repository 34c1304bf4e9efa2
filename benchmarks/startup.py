"""The cassette checker's start-up: the CPU a `pydantic-ai-append check` process spends, from its start to its exit.

Each run is a fresh interpreter (`python -m pydantic_ai_append`), as a shell or a CI step starts the command, and its
CPU time (user and system) is read from `resource.getrusage(RUSAGE_CHILDREN)` around it: for `check --help`, and for
a check of one small cassette (a three-request OpenAI Chat conversation, in vcrpy's YAML).
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from .tables import table

__all__ = ('STARTUP_LIMIT_SECONDS', 'StartupTiming', 'startup_sections', 'time_startup')

STARTUP_LIMIT_SECONDS = 1.0
"""Each command takes at most this much CPU, start-up included."""

_CHAT = 'https://api.openai.com/v1/chat/completions'


@dataclass(frozen=True)
class StartupTiming:
    """One command's CPU seconds, run after run."""

    command: str
    seconds: list[float]

    @property
    def median(self) -> float:
        """The median run."""
        return statistics.median(self.seconds)

    @property
    def quartiles(self) -> tuple[float, float]:
        """The 25th and 75th percentiles of the runs."""
        low, _, high = statistics.quantiles(self.seconds, n=4)
        return low, high


def _cassette() -> str:
    messages: list[dict[str, str]] = [{'role': 'system', 'content': 'Be brief.'}]
    interactions: list[dict[str, object]] = []
    for turn in range(3):
        messages.append({'role': 'user', 'content': f'Question {turn}?'})
        body = json.dumps({'model': 'gpt-5.2', 'messages': messages})
        reply = {'status': {'code': 200, 'message': 'OK'}, 'headers': {}, 'body': {'string': '{"choices": []}'}}
        interactions.append(
            {'request': {'method': 'POST', 'uri': _CHAT, 'body': body, 'headers': {}}, 'response': reply}
        )
        messages.append({'role': 'assistant', 'content': f'Answer {turn}.'})
    return yaml.safe_dump({'interactions': interactions, 'version': 1})


def _cpu_seconds(arguments: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, '-m', 'pydantic_ai_append', *arguments], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def time_startup(repeats: int) -> list[StartupTiming]:
    """Run each command `repeats` times, each in a process of its own."""
    with tempfile.TemporaryDirectory() as directory:
        cassette = Path(directory) / 'small.yaml'
        cassette.write_text(_cassette())
        commands = {'check --help': ['check', '--help'], 'check one small cassette': ['check', str(cassette)]}
        return [
            StartupTiming(name, [_cpu_seconds(arguments) for _ in range(repeats)])
            for name, arguments in commands.items()
        ]


def startup_sections(timings: Sequence[StartupTiming]) -> list[str]:
    """The report's table of the commands' CPU seconds, if they were timed."""
    if not timings:
        return []
    rows = [[t.command, f'{t.median:.3f} s', ', '.join(f'{s:.3f}' for s in t.seconds)] for t in timings]
    return [
        'The cassette checker in a process of its own: CPU seconds from start to exit, median of the runs\n\n'
        + table(['command', 'median', 'runs'], rows)
    ]
