"""`pydantic-ai-append check`: does every conversation recorded in a set of cassettes keep its prompt-cache prefix?

The command reads pytest-recording / vcrpy cassettes (`_cassettes`), picks the requests to the Anthropic
Messages, OpenAI Chat Completions and OpenAI Responses APIs by their path, splits each into cache-order segments
(`_segments`), resolves OpenAI Responses `previous_response_id` chains from the recorded replies
(`_conversation`), and groups the requests into conversations: per cassette, API and model, in cassette order.

One model may hold several conversations in one cassette (parametrized runs, sub-agents, a test that starts over).
A request joins the most recent conversation of its API and model whose last request it extends byte for byte.
If it extends none, a request with no history (no assistant turn, tool call or tool result, no
`previous_response_id`) starts a new conversation; any other request is the next request of the conversation it
shares the longest prefix with (the most recent on a tie), and breaks that conversation's prefix. A request whose
`previous_response_id` names a reply the cassette doesn't hold starts a new conversation too: there is nothing to
compare it with.

Exit status: 0 when every conversation keeps its prefix, 1 when one breaks it, 2 on bad usage or a file that
isn't a readable cassette.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ._cassettes import CASSETTE_SUFFIXES, CassetteError, Interaction, read_cassette
from ._conversation import WireConversation, has_history
from ._segments import API_PATHS, Api, Segment, common_prefix_length, divergence_message, parse_body, segments

__all__ = (
    'CassetteReport',
    'ConversationReport',
    'Divergence',
    'NewWindow',
    'check_cassette',
    'main',
)

REPORT_FORMAT = 1
"""The version of the `--json` document; it changes only when a key changes meaning or goes away."""


@dataclass(frozen=True)
class NewWindow:
    """An `--allow-new-window` option: a request allowed to move its conversation's prefix."""

    request: int
    """The request's position in its conversation, from 0."""
    file: Path | None = None
    """The cassette it applies to, or `None` for every cassette."""
    conversation: int | None = None
    """The conversation's number in the cassette, or `None` for every conversation."""

    def applies(self, file: Path, conversation: int, request: int) -> bool:
        """Whether this option allows request `request` of conversation `conversation` of `file` to move the prefix."""
        return (
            request == self.request
            and (self.file is None or _same_file(self.file, file))
            and (self.conversation is None or self.conversation == conversation)
        )


_NEW_WINDOW = re.compile(r'(?:(?P<file>.+?)(?:#(?P<conversation>\d+))?:)?(?P<request>\d+)')


def _new_window(text: str) -> NewWindow:
    match = _NEW_WINDOW.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f'{text!r} is not N, FILE:N or FILE#K:N (N a request, K a conversation)')
    file, conversation = match['file'], match['conversation']
    return NewWindow(
        int(match['request']),
        Path(file) if file is not None else None,
        int(conversation) if conversation is not None else None,
    )


def _same_file(one: Path, other: Path) -> bool:
    return one == other or one.resolve() == other.resolve()


@dataclass(frozen=True)
class Divergence:
    """A request that does not extend the previous request of its conversation byte for byte."""

    request: int
    """The request's position in its conversation, from 0."""
    interaction: int
    """Its position among the cassette's interactions, from 0."""
    segment: int
    """The first segment of the previous request it does not repeat."""
    kind: str
    """That segment's kind: `tool`, `system`, `message`, `instructions`, `input` or `output`."""
    message: str
    """What `assert_prefix_stable` says of it: both sides around the first differing byte."""


@dataclass(frozen=True)
class ConversationReport:
    """The verdict on one conversation."""

    file: Path
    """The cassette."""
    number: int
    """Its position among the cassette's conversations, from 0, by first request."""
    api: Api
    """The provider API."""
    model: str
    """The `model` of its request bodies (empty if they name none)."""
    interactions: tuple[int, ...]
    """The cassette interactions of its requests, in order."""
    reused_bytes: int
    """Segment bytes its requests repeat, from the start, of the request before them, as `prefix_reuse` counts."""
    total_bytes: int
    """Segment bytes of all its requests."""
    new_windows: tuple[int, ...]
    """Requests that moved the prefix where an `--allow-new-window` option allowed it."""
    divergences: tuple[Divergence, ...]
    """Requests that broke the prefix, in order."""

    @property
    def name(self) -> str:
        """`FILE#K`, as `--allow-new-window` takes it."""
        return f'{self.file}#{self.number}'

    @property
    def prefix_kept(self) -> bool:
        """Whether every request extends the one before it, but where a new window was allowed."""
        return not self.divergences


@dataclass(frozen=True)
class CassetteReport:
    """The verdicts on the conversations of one cassette."""

    file: Path
    """The cassette."""
    conversations: tuple[ConversationReport, ...]
    """Its conversations, by first request."""
    other_requests: int
    """Interactions that are not requests to one of the three APIs, and so are not checked."""


@dataclass
class _Conversation:
    api: Api
    model: str
    number: int
    last: list[Segment] = field(default_factory=list[Segment])
    last_update: int = -1
    interactions: list[int] = field(default_factory=list[int])
    reused_bytes: int = 0
    total_bytes: int = 0
    new_windows: list[int] = field(default_factory=list[int])
    divergences: list[Divergence] = field(default_factory=list[Divergence])

    def add(self, interaction: int, current: list[Segment], new_windows: Collection[int]) -> None:
        index = len(self.interactions)
        shared = common_prefix_length(self.last, current)
        if shared < len(self.last):
            if index in new_windows:
                self.new_windows.append(index)
            else:
                message = divergence_message(index, self.last, current, shared)
                self.divergences.append(Divergence(index, interaction, shared, self.last[shared].kind, message))
        self.reused_bytes += sum(len(segment.data) for segment in current[:shared])
        self.total_bytes += sum(len(segment.data) for segment in current)
        self.interactions.append(interaction)
        self.last, self.last_update = current, interaction

    def report(self, file: Path) -> ConversationReport:
        return ConversationReport(
            file,
            self.number,
            self.api,
            self.model,
            tuple(self.interactions),
            self.reused_bytes,
            self.total_bytes,
            tuple(self.new_windows),
            tuple(self.divergences),
        )


def _api(interaction: Interaction) -> Api | None:
    if interaction.method != 'POST':
        return None
    path = re.sub(r'[?#].*', '', interaction.uri)
    return next((api for api, api_path in API_PATHS.items() if path.endswith(api_path)), None)


def _conversation_for(
    conversations: list[_Conversation], api: Api, model: str, current: list[Segment], fresh: bool
) -> _Conversation | None:
    """The conversation a request belongs to, or `None` if it starts a new one."""
    candidates = sorted(
        (c for c in conversations if c.api == api and c.model == model), key=lambda c: c.last_update, reverse=True
    )
    shared = [common_prefix_length(c.last, current) for c in candidates]
    extended = next((c for c, count in zip(candidates, shared, strict=True) if count == len(c.last)), None)
    if extended is not None:
        return extended
    if fresh or not candidates:
        return None
    return candidates[shared.index(max(shared))]


def check_cassette(
    file: Path, interactions: Iterable[Interaction], new_windows: Sequence[NewWindow] = ()
) -> CassetteReport:
    """Group a cassette's provider requests into conversations and check that each keeps its prefix.

    Args:
        file: The cassette, for the report.
        interactions: Its interactions, in order.
        new_windows: Requests allowed to move the prefix.

    Returns:
        The report.

    Raises:
        CassetteError: If a request body to one of the APIs is not a JSON object, or a body can't be decoded.
    """
    conversations: list[_Conversation] = []
    resolvers: dict[Api, WireConversation] = {}
    other = 0
    for interaction in interactions:
        api = _api(interaction)
        if api is None:
            other += 1
            continue
        body = interaction.request_body()
        try:
            request = parse_body(api, body)
        except (ValueError, TypeError):
            raise CassetteError(
                f'{file}: interaction {interaction.index} ({interaction.method} {interaction.uri}): the request body '
                f'is not a JSON object: {body[:80]!r}'
            ) from None
        resolver = resolvers.setdefault(api, WireConversation(api))
        resolved = resolver.resolve(body)
        current = resolved if resolved is not None else segments(api, body)
        model = request.get('model')
        model = model if isinstance(model, str) else ''
        conversation = _conversation_for(
            conversations, api, model, current, fresh=resolved is None or not has_history(request)
        )
        if conversation is None:
            conversation = _Conversation(api, model, len(conversations))
            conversations.append(conversation)
        allowed = {w.request for w in new_windows if w.applies(file, conversation.number, w.request)}
        conversation.add(interaction.index, current, allowed)
        if api == 'openai-responses' and (reply := interaction.response_body()) is not None:
            resolver.add_response(current, reply)
    return CassetteReport(file, tuple(c.report(file) for c in conversations), other)


def _cassettes(paths: Sequence[Path]) -> tuple[list[Path], list[str]]:
    found: list[Path] = []
    errors: list[str] = []
    for path in paths:
        if path.is_dir():
            files = sorted(p for p in path.rglob('*') if p.suffix.lower() in CASSETTE_SUFFIXES and p.is_file())
            if not files:
                errors.append(f'{path}: no cassettes (*.yaml, *.yml, *.json) in this directory')
            found.extend(files)
        elif path.exists():
            found.append(path)
        else:
            errors.append(f'{path}: no such file or directory')
    unique = list(dict.fromkeys(found))
    return unique, errors


def _human(reports: Sequence[CassetteReport], out: TextIO) -> None:
    conversations = [c for report in reports for c in report.conversations]
    for report in reports:
        if not report.conversations:
            print(f'{report.file}: no requests to a provider API', file=out)
        for c in report.conversations:
            share = f'{c.reused_bytes / c.total_bytes:.0%}' if c.total_bytes else 'n/a'
            head = (
                f'{c.name}: {c.api} {c.model or "(no model)"}, {_count(len(c.interactions), "request")}, '
                f'{c.reused_bytes:,} of {c.total_bytes:,} bytes reused ({share})'
            )
            windows = f', new window at request {", ".join(map(str, c.new_windows))}' if c.new_windows else ''
            if c.prefix_kept:
                print(f'{head}: prefix kept{windows}', file=out)
                continue
            broken = ', '.join(str(d.request) for d in c.divergences)
            print(f'{head}: prefix broken at request {broken}{windows}', file=out)
            first = c.divergences[0]
            print(f'  interaction {first.interaction}: ' + first.message.replace('\n', '\n  '), file=out)
            print(
                f'  (if request {first.request} opens a new window, pass --allow-new-window {shlex.quote(f"{c.name}:{first.request}")})',
                file=out,
            )
    broken = sum(not c.prefix_kept for c in conversations)
    verdict = (
        'every one keeps its prefix' if not broken else f'{broken} break{"s its" if broken == 1 else " their"} prefix'
    )
    print(f'{_count(len(conversations), "conversation")} in {_count(len(reports), "cassette")}: {verdict}', file=out)


def _count(number: int, noun: str) -> str:
    return f'{number} {noun}{"" if number == 1 else "s"}'


def _document(reports: Sequence[CassetteReport], errors: Sequence[str]) -> dict[str, Any]:
    return {
        'format': REPORT_FORMAT,
        'ok': not errors and all(c.prefix_kept for r in reports for c in r.conversations),
        'errors': list(errors),
        'cassettes': [
            {
                'file': str(report.file),
                'other_requests': report.other_requests,
                'conversations': [
                    {
                        'name': c.name,
                        'api': c.api,
                        'model': c.model,
                        'requests': len(c.interactions),
                        'interactions': list(c.interactions),
                        'reused_bytes': c.reused_bytes,
                        'total_bytes': c.total_bytes,
                        'prefix_kept': c.prefix_kept,
                        'new_windows': list(c.new_windows),
                        'divergences': [
                            {
                                'request': d.request,
                                'interaction': d.interaction,
                                'segment': d.segment,
                                'kind': d.kind,
                                'message': d.message,
                            }
                            for d in c.divergences
                        ],
                    }
                    for c in report.conversations
                ],
            }
            for report in reports
        ],
    }


_DESCRIPTION = """\
Check that every conversation recorded in pytest-recording / vcrpy cassettes keeps its prompt-cache prefix: each
request to the Anthropic Messages, OpenAI Chat Completions or OpenAI Responses API extends the previous request of
its conversation byte for byte, segment by segment in cache order. Exit status: 0 if every conversation keeps its
prefix, 1 if one breaks it, 2 on bad usage or a file that is not a readable cassette."""

_NEW_WINDOW_HELP = """\
let a request move its conversation's prefix (a known new window: compaction, new instructions): N for request N
(from 0) of every conversation, FILE:N for every conversation of one cassette, FILE#K:N for conversation K of it,
as the report names it; may be given more than once"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='pydantic-ai-append', description='Tools for pydantic-ai-append.')
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
    check = commands.add_parser(
        'check', help='check that recorded conversations keep their prompt-cache prefix', description=_DESCRIPTION
    )
    check.add_argument('paths', nargs='+', type=Path, metavar='PATH', help='a cassette, or a directory of them')
    check.add_argument('--json', action='store_true', help='print a JSON document instead of the report')
    check.add_argument(
        '--allow-new-window',
        action='append',
        type=_new_window,
        default=[],
        metavar='[FILE[#K]:]N',
        help=_NEW_WINDOW_HELP,
    )
    return parser


def _unknown_windows(windows: Sequence[NewWindow], reports: Sequence[CassetteReport]) -> list[str]:
    unknown: list[str] = []
    for window in windows:
        if window.file is None:
            continue
        matches = [r for r in reports if _same_file(window.file, r.file)]
        if not matches:
            unknown.append(f'--allow-new-window names {window.file}, which is not one of the cassettes checked')
        elif window.conversation is not None and window.conversation >= len(matches[0].conversations):
            unknown.append(
                f'--allow-new-window names conversation {window.conversation} of {window.file}, which has '
                f'{len(matches[0].conversations)}'
            )
    return unknown


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line: `pydantic-ai-append check PATH... [--json] [--allow-new-window [FILE[#K]:]N]...`.

    Args:
        argv: The arguments after the program name; by default `sys.argv[1:]`.

    Returns:
        The exit status: 0 if every conversation keeps its prefix, 1 if one breaks it, 2 on bad usage or input.
    """
    try:
        options = _parser().parse_args(argv)
    except SystemExit as exit:
        # argparse has printed the usage error (status 2) or the help (status 0).
        return exit.code if isinstance(exit.code, int) else 2
    new_windows: list[NewWindow] = options.allow_new_window
    files, errors = _cassettes(options.paths)
    reports: list[CassetteReport] = []
    for file in files:
        try:
            reports.append(check_cassette(file, read_cassette(file), new_windows))
        except CassetteError as error:
            errors.append(str(error))
    errors.extend(_unknown_windows(new_windows, reports))
    if options.json:
        json.dump(_document(reports, errors), sys.stdout, indent=2)
        print()
    else:
        _human(reports, sys.stdout)
    for error in errors:
        print(f'pydantic-ai-append check: error: {error}', file=sys.stderr)
    if errors:
        return 2
    return 0 if all(c.prefix_kept for report in reports for c in report.conversations) else 1
