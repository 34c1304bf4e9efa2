"""`pydantic-ai-append check`: does every conversation recorded in a set of cassettes keep its prompt-cache prefix?

The command line: it finds the cassettes in the paths it is given, reads each (`cassettes`), has its requests grouped
into conversations and judged (`verdicts`), and prints the verdicts (`reports`), as a report or a JSON document. How a
request is told to belong to a conversation is in `verdicts`. The report details each request that broke a
conversation's prefix (where, why and the fix), up to ten a conversation, and counts the others; `--json` lists them
all.

Exit status: 0 when every conversation keeps its prefix, 1 when one breaks it, 2 on bad usage or a file that
isn't a readable cassette. On status 2 the report still gives the verdicts of the cassettes that were read, and its
last line says how many files could not be read; no line claims that the check passed. Each cause of an error is said
once (on standard error, and grouped by cause in `--json`'s `errors_by_cause`), naming the files it applies to: all of
them, up to five, or the first three and how many more.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .._wire.causes import why_and_fix
from .cassettes import CASSETTE_SUFFIXES, CassetteError, read_cassette
from .reports import CassetteReport, ConversationReport, NewWindow, RequestVerdict, same_file
from .verdicts import check_cassette

REPORT_FORMAT = 1
"""The version of the `--json` document; it changes only when a key changes meaning or goes away.

Format 1's keys: `format`, `ok`, `errors` (every error's message, one for each file it applies to), `cassettes` (the
verdicts of those that were read) and, added since, `errors_by_cause` (each cause once, with the `files` it applies to,
none for an error in the arguments); in a divergence, `setting` (the request field that moved the cache, for kind
`setting`), `cause`, `why` and `fix` (why the prefix moved, where told); in a conversation, `request_verdicts` (each
request's `reused_bytes` and `total_bytes`, the `provider`'s cache use where its reply reports it, and a
`disagreement` between the two, `read_more` or `missed`, as `_wire.usage.disagreement` decides).
"""

_SHOWN_FILES = 5
"""The most files an error message names one by one; past it, it names the first three and counts the others."""


_DETAILED = 10
"""The most requests of one conversation whose break the report details; it counts the others (`--json` lists all)."""

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


def _cassettes(paths: Sequence[Path]) -> tuple[list[Path], list[CassetteError]]:
    found: list[Path] = []
    errors: list[CassetteError] = []
    for path in paths:
        if path.is_dir():
            files = sorted(p for p in path.rglob('*') if p.suffix.lower() in CASSETTE_SUFFIXES and p.is_file())
            if not files:
                # An argument in error rather than a file not read: the directory is named in the cause.
                errors.append(CassetteError(f'{path}: no cassettes (*.yaml, *.yml, *.json) in this directory', None))
            found.extend(files)
        elif path.exists():
            found.append(path)
        else:
            errors.append(CassetteError('no such file or directory', path))
    unique = list(dict.fromkeys(found))
    return unique, errors


def _human(reports: Sequence[CassetteReport], errors: Sequence[CassetteError], out: TextIO) -> None:
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
            else:
                _divergences(c, head, windows, out)
            _provider(c, out)
    broken = sum(not c.prefix_kept for c in conversations)
    verdict = (
        f'{broken} break{"s its" if broken == 1 else " their"} prefix'
        if broken
        else 'every one keeps its prefix'
        if conversations
        else 'no requests to a provider API, nothing checked'
    )
    checked = f'{_count(len(conversations), "conversation")} in {_count(len(reports), "cassette")}'
    if not errors:
        print(f'{checked}: {verdict}', file=out)
        return
    if reports:
        print(f'{checked} read: {verdict}', file=out)
    print(_incomplete(errors), file=out)


def _divergences(conversation: ConversationReport, head: str, windows: str, out: TextIO) -> None:
    """A broken prefix: each request that broke it, with where, why and the fix, up to `_DETAILED` of them."""
    shown, more = conversation.divergences[:_DETAILED], len(conversation.divergences) - _DETAILED
    broken = ', '.join(str(d.request) for d in shown) + (f' and {more} more' if more > 0 else '')
    print(f'{head}: prefix broken at request {broken}{windows}', file=out)
    for divergence in shown:
        allow = f'pass --allow-new-window {shlex.quote(f"{conversation.name}:{divergence.request}")}'
        told = why_and_fix(divergence.request, divergence.cause, allow)
        lines = f'interaction {divergence.interaction}: {divergence.message}\n{told}'
        print('  ' + lines.replace('\n', '\n  '), file=out)
    if more > 0:
        print(f'  and {_count(more, "more request")} broke it (`--json` lists every one)', file=out)


def _provider(conversation: ConversationReport, out: TextIO) -> None:
    """The provider's cache use beside the checker's verdict, where the replies report it, and each disagreement."""
    measured = [r.provider for r in conversation.requests if r.provider is not None]
    if not measured:
        return
    read, tokens = sum(u.cache_read_tokens for u in measured), sum(u.input_tokens for u in measured)
    share = f' ({read / tokens:.0%})' if tokens else ''
    some = len(measured) < len(conversation.requests)
    of = f', as {len(measured)} of the {len(conversation.requests)} replies report' if some else ''
    print(f'  provider: read {read:,} of {tokens:,} input tokens from cache{share}{of}', file=out)
    for verdict in conversation.requests:
        if verdict.disagreement is not None:
            found = verdict.disagreement
            print(
                f'  request {verdict.request} (interaction {verdict.interaction}), {found.kind}: {found.message}',
                file=out,
            )


def _incomplete(errors: Sequence[CassetteError]) -> str:
    unread = len({error.file for error in errors if error.file is not None})
    arguments = sum(error.file is None for error in errors)
    parts = [f'{_count(unread, "file")} could not be read'] if unread else []
    parts += [f'{_count(arguments, "error")} in the arguments'] if arguments else []
    return f'incomplete: {" and ".join(parts)} (exit status 2)'


def _grouped(errors: Sequence[CassetteError]) -> dict[str, list[Path]]:
    groups: dict[str, list[Path]] = {}
    for error in errors:
        files = groups.setdefault(error.cause, [])
        if error.file is not None and error.file not in files:
            files.append(error.file)
    return groups


def _print_errors(errors: Sequence[CassetteError], out: TextIO) -> None:
    for cause, files in _grouped(errors).items():
        names = [str(file) for file in files]
        if len(names) > _SHOWN_FILES:
            names = [*names[:3], f'{len(names) - 3} other files']
        if len(names) > 1:
            names = [f'{", ".join(names[:-1])} and {names[-1]}']
        print('pydantic-ai-append check: error:', *(f'{name}:' for name in names), cause, file=out)


def _count(number: int, noun: str) -> str:
    return f'{number} {noun}{"" if number == 1 else "s"}'


def _document(reports: Sequence[CassetteReport], errors: Sequence[CassetteError]) -> dict[str, Any]:
    return {
        'format': REPORT_FORMAT,
        'ok': not errors and all(c.prefix_kept for r in reports for c in r.conversations),
        'errors': [str(error) for error in errors],
        'errors_by_cause': [
            {'cause': cause, 'files': [str(file) for file in files]} for cause, files in _grouped(errors).items()
        ],
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
                                'setting': d.setting,
                                'cause': d.cause.kind if d.cause is not None else None,
                                'why': d.cause.reason if d.cause is not None else None,
                                'fix': d.cause.fix if d.cause is not None else None,
                            }
                            for d in c.divergences
                        ],
                        'request_verdicts': [_request_verdict(r) for r in c.requests],
                    }
                    for c in report.conversations
                ],
            }
            for report in reports
        ],
    }


def _request_verdict(verdict: RequestVerdict) -> dict[str, Any]:
    usage, found = verdict.provider, verdict.disagreement
    return {
        'request': verdict.request,
        'interaction': verdict.interaction,
        'reused_bytes': verdict.reused_bytes,
        'total_bytes': verdict.total_bytes,
        'provider': None
        if usage is None
        else {
            'input_tokens': usage.input_tokens,
            'cache_read_tokens': usage.cache_read_tokens,
            'cache_write_tokens': usage.cache_write_tokens,
            'cache_reported': usage.cache_reported,
        },
        'disagreement': None if found is None else {'kind': found.kind, 'message': found.message},
    }


_DESCRIPTION = """\
Check that every conversation recorded in pytest-recording / vcrpy cassettes keeps its prompt-cache prefix: each
request to the Anthropic Messages, OpenAI Chat Completions or OpenAI Responses API, the Chat Completions of Mistral,
Groq or Hugging Face, Cohere's v2 Chat, Google Gemini's generateContent or AWS Bedrock's Converse (and their streamed
forms) extends the previous request of its conversation byte for byte, segment by segment in cache order. Exit
status: 0 if every conversation keeps its prefix, 1 if one breaks it, 2 on bad usage or a file that is not a readable
cassette."""

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


def _unknown_windows(windows: Sequence[NewWindow], reports: Sequence[CassetteReport]) -> list[CassetteError]:
    unknown: list[CassetteError] = []
    for window in windows:
        if window.file is None:
            continue
        matches = [r for r in reports if same_file(window.file, r.file)]
        if not matches:
            unknown.append(
                CassetteError(
                    f'--allow-new-window names {window.file}, which is not one of the cassettes checked', None
                )
            )
        elif window.conversation is not None and window.conversation >= len(matches[0].conversations):
            unknown.append(
                CassetteError(
                    f'--allow-new-window names conversation {window.conversation} of {window.file}, which has '
                    f'{len(matches[0].conversations)}',
                    None,
                )
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
            errors.append(error)
    errors.extend(_unknown_windows(new_windows, reports))
    if options.json:
        json.dump(_document(reports, errors), sys.stdout, indent=2)
        print()
    else:
        _human(reports, errors, sys.stdout)
    _print_errors(errors, sys.stderr)
    if errors:
        return 2
    return 0 if all(c.prefix_kept for report in reports for c in report.conversations) else 1
