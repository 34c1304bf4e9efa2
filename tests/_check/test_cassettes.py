"""Cassettes as the checker reads them (`_check/cassettes`).

`pydantic-ai-append check`, on what it reads: request bodies and replies in every form a cassette records them
(compressed, as bytes, in vcrpy's older shapes, as YAML or JSON), and the files, bodies and usage it refuses.

`pydantic-ai-append check` on the cassettes Pydantic AI's own test suite records (bodies compressed with brotli or
zstd are `_wire/test_wire_encoding.py`'s).

`fixtures/recorders/` holds three conversations, written for these tests in the two shapes Pydantic AI's suite records
them: `pydantic_ai_serializer/` as its older vcrpy serializer (`tests/json_body_serializer.py`) writes a cassette, a JSON
body as `parsed_body` beside the headers, keys sorted; `cassetter/` as cassetter writes one, every body typed. Each is
an Anthropic tool call and its result, an OpenAI Chat conversation streamed whose system prompt carries a clock that
moves on the third request, and an OpenAI Responses conversation through `previous_response_id` whose first reply is
JSON and second a server-sent event stream. Every test runs the command through `main`.
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from inline_snapshot import snapshot

from pydantic_ai_append._check.cassettes import read_cassette
from pydantic_ai_append._check.cli import main

from ..check_helpers import CHAT, RESPONSES, assistant, chat_turns, interaction, run, user, write_cassette

# --- bodies and replies in every recorded form ---


def test_bodies_in_every_recorded_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    tmp_path = Path('.')
    first = {'model': 'm', 'messages': [user('a')]}
    second = {'model': 'm', 'messages': [user('a'), assistant('b'), user('c')]}
    deflated = zlib.compress(json.dumps(second).encode())
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw = raw_deflate.compress(json.dumps(second).encode()) + raw_deflate.flush()
    interactions = [
        interaction(CHAT, gzip.compress(json.dumps(first).encode()), request_headers={'Content-Encoding': ['gzip']}),
        interaction(CHAT, deflated, request_headers={'content-encoding': ['deflate']}),
        # A hand-written cassette may give a header as a plain string.
        interaction(CHAT, raw, request_headers={'content-encoding': 'deflate'}),  # pyright: ignore[reportArgumentType]
        # A body kept decompressed though its header says gzip, as vcrpy tolerates.
        interaction(CHAT, json.dumps(second), request_headers={'content-encoding': ['x-gzip']}),
        interaction(CHAT, json.dumps(second), request_headers={'content-encoding': ['identity']}),
    ]
    # vcrpy's old httpx stubs kept a response body as `content`.
    interactions[0]['response'] = {'status_code': 200, 'headers': {}, 'content': '{}'}
    file = write_cassette(tmp_path / 'forms.yml', interactions)
    status, out, _ = run(capsys, str(file))
    assert (status, out.splitlines()[0].split(': ')[-1]) == (0, 'prefix kept')
    # vcrpy's JSON serializer: the same shape, as JSON.
    json_file = tmp_path / 'forms.json'
    json_file.write_text(json.dumps({'interactions': [interaction(CHAT, first), interaction(CHAT, second)]}))
    no_model = tmp_path / 'empty-body.yaml'
    write_cassette(no_model, [interaction(CHAT, {})])
    status, out, _ = run(capsys, str(json_file), str(no_model), str(json_file))
    assert (status, out) == snapshot(
        (
            0,
            """\
forms.json#0: openai-chat m, 2 requests, 29 of 121 bytes reused (24%): prefix kept
empty-body.yaml#0: openai-chat (no model), 1 request, 0 of 0 bytes reused (n/a): prefix kept
2 conversations in 2 cassettes: every one keeps its prefix
""",
        )
    )


def test_responses_replies_in_older_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # A reply kept as `content` (vcrpy's old httpx stubs), in a cassette whose headers are missing altogether.
    reply = {'id': 'resp_1', 'output': [assistant('Hi.')]}
    first = interaction(RESPONSES, {'model': 'm', 'input': [user('Hi?')]})
    first['response'] = {'status_code': 200, 'content': json.dumps(reply)}
    second = interaction(RESPONSES, {'model': 'm', 'previous_response_id': 'resp_1', 'input': [user('Bye?')]})
    second['request']['headers'] = None
    # A reply body as a bare string, as a hand-written cassette may have it.
    second['response']['body'] = json.dumps({'id': 'resp_2', 'output': []})
    third = interaction(RESPONSES, {'model': 'm', 'previous_response_id': 'resp_2', 'input': [user('Now?')]})
    status, out, _ = run(capsys, '--json', str(write_cassette(tmp_path / 'old.yaml', [first, second, third])))
    conversations = json.loads(out)['cassettes'][0]['conversations']
    assert (status, [c['interactions'] for c in conversations]) == (0, [[0, 1, 2]])


# --- unreadable input and bad usage ---


@pytest.mark.parametrize(
    ('content', 'message'),
    [
        ('interactions: [unclosed', 'not YAML: while parsing a flow sequence'),
        ('', 'empty file, not a cassette'),
        ('- request: {}\n', 'not a cassette: expected a mapping with an `interactions` list, found a list'),
        ('version: 1\n', 'not a cassette: expected a mapping with an `interactions` list, found a mapping without'),
        ('interactions: [7]\n', 'not a cassette: interaction 0 is not a `request` and a `response`'),
        (
            'interactions: [{request: {}, response: {}}]\n',
            'not a cassette: the request of interaction 0 has no `method` and `uri`',
        ),
        ('interactions: [!!python/object:os.system {}]\n', 'holds YAML the safe loader does not build'),
    ],
)
def test_a_file_that_is_not_a_cassette(
    content: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    Path('bad.yaml').write_text(content)
    status, _, err = run(capsys, 'bad.yaml')
    assert status == 2
    assert err.startswith(f'pydantic-ai-append check: error: bad.yaml: {message}')
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ('body', 'headers', 'message'),
    [
        ('Hello there', {}, "the request body is not a JSON object: b'Hello there'"),
        ('[1, 2]', {}, "the request body is not a JSON object: b'[1, 2]'"),
        (None, {}, 'the request has no body'),
        (
            '{}',
            {'content-encoding': ['compress']},
            "the request body has content-encoding 'compress', which the checker cannot decode",
        ),
    ],
)
def test_a_request_body_that_is_not_json(
    body: str | None,
    headers: dict[str, list[str]],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.chdir(tmp_path)
    write_cassette(
        Path('body.yaml'), [interaction(CHAT, {'messages': []}), interaction(CHAT, body, request_headers=headers)]
    )
    status, out, err = run(capsys, 'body.yaml', 'missing.yaml')
    assert (status, out) == (2, 'incomplete: 2 files could not be read (exit status 2)\n')
    assert err.splitlines() == [
        'pydantic-ai-append check: error: missing.yaml: no such file or directory',
        f'pydantic-ai-append check: error: body.yaml: interaction 1 (POST {CHAT}): {message}',
    ]


def test_a_body_that_is_neither_text_nor_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cassette = {'interactions': [interaction(CHAT, {'messages': []})]}
    cassette['interactions'][0]['request']['body'] = 42
    file = tmp_path / 'number.json'
    file.write_text(json.dumps(cassette))
    assert 'the request body is a int, not text or bytes' in run(capsys, str(file))[2]
    file.write_text('{"interactions": [}')
    assert 'number.json: not JSON: Expecting value' in run(capsys, str(file))[2]
    file.write_bytes(b'\xff\xfe interactions')
    assert 'number.json: not a text file' in run(capsys, str(file))[2]


def test_an_empty_cassette_and_an_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    file = write_cassette(tmp_path / 'cassettes' / 'empty.yaml', [])
    (tmp_path / 'cassettes' / 'notes.txt').write_text('not a cassette, and not read')
    (tmp_path / 'nothing').mkdir()
    assert run(capsys, str(tmp_path / 'cassettes')) == (
        0,
        f'{file}: no requests to a provider API\n0 conversations in 1 cassette: no requests to a provider API, nothing checked\n',
        '',
    )
    status, _, err = run(capsys, str(tmp_path / 'nothing'))
    assert (status, err) == (
        2,
        (
            f'pydantic-ai-append check: error: {tmp_path / "nothing"}: no cassettes (*.yaml, *.yml, *.json) in this '
            'directory\n'
        ),
    )


def test_a_directory_named_like_a_cassette_cannot_be_read(tmp_path: Path):
    (tmp_path / 'dir.yaml').mkdir()
    with pytest.raises(Exception, match=r'dir\.yaml: cannot be read: Is a directory'):
        read_cassette(tmp_path / 'dir.yaml')


def test_without_pyyaml(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    yaml_file = write_cassette(tmp_path / 'a.yaml', [interaction(CHAT, {'messages': []})])
    json_file = tmp_path / 'b.json'
    json_file.write_text(json.dumps({'interactions': [interaction(CHAT, {'messages': []})]}))
    monkeypatch.setitem(sys.modules, 'yaml', None)
    status, _, err = run(capsys, str(yaml_file), str(json_file))
    assert (status, err) == (
        2,
        (
            f'pydantic-ai-append check: error: {yaml_file}: reading a YAML cassette needs PyYAML, which is not installed: '
            "install it with `pip install 'pydantic-ai-append[testing]'`\n"
        ),
    )


@pytest.mark.parametrize(
    ('args', 'message'),
    [
        ([], 'the following arguments are required: PATH'),
        (['x.yaml', '--allow-new-window', 'two'], "'two' is not N, FILE:N or FILE#K:N"),
    ],
)
def test_bad_usage(args: list[str], message: str, capsys: pytest.CaptureFixture[str]):
    status, out, err = run(capsys, *args)
    assert (status, out, message in err, err.startswith('usage: pydantic-ai-append check')) == (2, '', True, True)


def test_usage_without_a_command_and_help(capsys: pytest.CaptureFixture[str]):
    assert main([]) == 2
    assert 'the following arguments are required: COMMAND' in capsys.readouterr().err
    assert main(['check', '--help']) == 0
    assert '--allow-new-window [FILE[#K]:]N' in capsys.readouterr().out


def test_an_allowed_window_in_a_cassette_not_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    file = write_cassette(tmp_path / 'a.yaml', chat_turns(['x'] * 2, [[]] * 2))
    status, _, err = run(capsys, str(file), '--allow-new-window', 'other.yaml:1')
    assert (status, err) == (
        2,
        (
            'pydantic-ai-append check: error: --allow-new-window names other.yaml, which is not one of the cassettes '
            'checked\n'
        ),
    )
    status, _, err = run(capsys, str(file), '--allow-new-window', f'{file}#3:1')
    assert (status, err) == (
        2,
        f'pydantic-ai-append check: error: --allow-new-window names conversation 3 of {file}, which has 1\n',
    )


RECORDERS = Path(__file__).parents[1] / 'fixtures' / 'recorders'
FORMATS = ('pydantic_ai_serializer', 'cassetter')


def as_vcrpy(recorded: dict[str, Any], kind: str) -> dict[str, Any]:
    """One request or response of either format as plain vcrpy records it, the JSON as compact text."""
    plain = {key: value for key, value in recorded.items() if key not in ('body', 'parsed_body')}
    if 'parsed_body' in recorded:
        body = json.dumps(recorded['parsed_body'], separators=(',', ':'))
    elif isinstance(recorded.get('body'), dict) and 'type' in recorded['body']:
        typed = recorded['body']
        body = {'json': lambda: json.dumps(typed['content'], separators=(',', ':')), 'text': lambda: typed['content']}[
            typed['type']
        ]()
    else:
        body = recorded['body']['string'] if kind == 'response' else recorded['body']
    plain['body'] = {'string': body} if kind == 'response' else body
    if isinstance(plain.get('status'), int):
        plain['status'] = {'code': plain['status'], 'message': 'OK'}
    return plain


def verdicts(capsys: pytest.CaptureFixture[str], directory: Path) -> list[dict[str, Any]]:
    status, out, err = run(capsys, '--json', str(directory))
    assert (status, err) == (1, '')
    return [
        {'file': Path(cassette['file']).name, **{k: v for k, v in c.items() if k != 'name'}}
        for cassette in json.loads(out)['cassettes']
        for c in cassette['conversations']
    ]


@pytest.mark.parametrize('recorder', FORMATS)
def test_pydantic_ais_cassettes_give_the_verdicts_of_plain_vcrpy_ones(
    recorder: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    for file in sorted((RECORDERS / recorder).glob('*.yaml')):
        cassette = yaml.safe_load(file.read_text())
        plain = [
            {'request': as_vcrpy(item['request'], 'request'), 'response': as_vcrpy(item['response'], 'response')}
            for item in cassette['interactions']
        ]
        write_cassette(tmp_path / file.name, plain)
    found = verdicts(capsys, RECORDERS / recorder)
    assert found == verdicts(capsys, tmp_path)
    summary = [(c['file'], c['api'], c['interactions'], [d['request'] for d in c['divergences']]) for c in found]
    # One conversation each; the Responses one resolved through both replies; Chat's clock breaks request 2.
    assert summary == snapshot(
        [
            ('anthropic_tool_call.yaml', 'anthropic', [0, 1, 2], []),
            ('openai_chat_streamed.yaml', 'openai-chat', [0, 1, 2], [2]),
            ('openai_responses_previous_response_id.yaml', 'openai-responses', [0, 1, 2], []),
        ]
    )


@pytest.mark.parametrize(
    ('recorder', 'no_reply'),
    [('pydantic_ai_serializer', {'body': {'string': None}}), ('cassetter', {'body': {'type': 'none'}})],
)
def test_a_previous_response_id_resolves_through_a_structured_or_streamed_reply(
    recorder: str, no_reply: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    name = 'openai_responses_previous_response_id.yaml'
    cassette = yaml.safe_load((RECORDERS / recorder / name).read_text())
    # Each later request sends only its new input, so each is whole only once the reply before it is resolved.
    status, out, _ = run(capsys, '--json', str(RECORDERS / recorder / name))
    [conversation] = json.loads(out)['cassettes'][0]['conversations']
    assert (status, conversation['interactions'], conversation['prefix_kept']) == (0, [0, 1, 2], True)
    # Negative controls: without the JSON reply (interaction 0), or the streamed one (1), the next request names a
    # response the cassette doesn't hold, and starts a conversation of its own.
    for missing, split in ((0, [[0], [1, 2]]), (1, [[0, 1], [2]])):
        changed = json.loads(json.dumps(cassette, default=str))
        response = changed['interactions'][missing]['response']
        response.pop('parsed_body', None)
        response.update(no_reply)
        (tmp_path / name).write_text(yaml.safe_dump(changed))
        status, out, _ = run(capsys, '--json', str(tmp_path / name))
        assert (status, [c['interactions'] for c in json.loads(out)['cassettes'][0]['conversations']]) == (0, split)


def cassetter_chat(bodies: list[dict[str, Any]]) -> str:
    """A cassette as cassetter writes it, of a first request as JSON structure and then `bodies`."""
    first = {'model': 'gpt-4.1', 'messages': [user('a')]}
    cassette: dict[str, Any] = {
        'version': 1,
        'interactions': [
            {
                'request': {'method': 'POST', 'uri': CHAT, 'headers': {}, 'body': body},
                'response': {'status': 200, 'headers': {}, 'body': {'type': 'json', 'content': {'choices': []}}},
            }
            for body in [{'type': 'json', 'content': first}, *bodies]
        ],
    }
    # Keys as given: a structured body is compared in the key order of the file, and the bodies given as text are not.
    return yaml.safe_dump(cassette, sort_keys=False)


def test_cassetter_bodies_of_every_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    second = {'model': 'gpt-4.1', 'messages': [user('a'), assistant('b')]}
    third = {'model': 'gpt-4.1', 'messages': [user('a'), assistant('b'), user('c')]}
    bodies = [
        {'type': 'binary', 'content': json.dumps(second).encode().hex()},
        {'type': 'text', 'content': json.dumps(third)},
    ]
    (tmp_path / 'typed.yaml').write_text(cassetter_chat(bodies))
    status, out, _ = run(capsys, str(tmp_path / 'typed.yaml'))
    assert (status, out.splitlines()[0].split(': ', 1)[1]) == snapshot(
        (0, 'openai-chat gpt-4.1, 3 requests, 92 of 184 bytes reused (50%): prefix kept')
    )


@pytest.mark.parametrize(
    ('body', 'message'),
    [
        ({'type': 'none'}, 'the request has no body'),
        ({'type': 'binary', 'content': 'zz'}, "the request body of type binary is not hex: 'zz'"),
        ({'type': 'text', 'content': 7}, 'the request body of type text has int content, not a string'),
        ({'type': 'form', 'content': 'a=1'}, "the request body has type 'form', not json, text, binary or none"),
        (
            {'type': 'json', 'content': {'model': 'm', 'sent': '2026-12-03'}},
            'the request body is kept as structure that JSON cannot hold (Object of type date is not JSON serializable)',
        ),
    ],
)
def test_a_cassetter_body_the_checker_refuses(
    body: dict[str, Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    file = tmp_path / 'typed.yaml'
    # `safe_dump` quotes a string that looks like a date; unquoted, YAML reads it as a date, which JSON has not.
    file.write_text(cassetter_chat([body]).replace("'2026-12-03'", '2026-12-03'))
    status, _, err = run(capsys, str(file))
    assert status == 2
    assert err.startswith(f'pydantic-ai-append check: error: {file}: interaction 1 (POST {CHAT}): {message}')
