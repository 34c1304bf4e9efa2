"""`pydantic-ai-append check`, on what it reads: request bodies and replies in every form a cassette records them
(compressed, as bytes, in vcrpy's older shapes, as YAML or JSON), and the files, bodies and usage it refuses.
"""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from pathlib import Path

import pytest
from inline_snapshot import snapshot

from pydantic_ai_append._check.cassettes import read_cassette
from pydantic_ai_append._check.cli import main

from .check_helpers import CHAT, RESPONSES, assistant, chat_turns, interaction, run, user, write_cassette

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
