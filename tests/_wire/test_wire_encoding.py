"""A body's `content-encoding` undone (`_wire.encoding`): by `decoded`, as the transport wrappers undo a reply they tee,
and by the cassette checker, for bodies recorded with brotli or zstd, with the library installed or not.
"""

from __future__ import annotations

import gzip
import json
import sys
import types
import zlib
from pathlib import Path
from typing import Any

import brotli as brotli_module  # pyright: ignore[reportMissingTypeStubs]
import pytest
import zstandard

from pydantic_ai_append._wire.encoding import decoded

from ..check_helpers import CHAT, RESPONSES, assistant, interaction, run, user, write_cassette

brotli: Any = brotli_module  # it ships no types


def test_decoded_undoes_what_the_client_undoes_and_leaves_the_rest():
    # The cassette checker decodes through the same function (the tests below show brotli and zstd there).
    body = b'{"id":"resp_1"}'
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    assert [
        decoded(gzip.compress(body), 'gzip'),
        decoded(gzip.compress(gzip.compress(body)), 'gzip, x-gzip'),
        decoded(zlib.compress(body), 'Deflate'),
        decoded(raw_deflate.compress(body) + raw_deflate.flush(), 'deflate'),
        decoded(brotli.compress(body), 'br'),
        decoded(body, None),
        decoded(body, 'identity'),
    ] == [body] * 7
    # A reply cut short decodes as far as it goes, as the client reads it; but raw deflate has no header to tell it
    # from a body that was never compressed, so only a whole one is decoded.
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    cut = (raw_deflate.compress(body) + raw_deflate.flush())[:-2]
    assert [decoded(gzip.compress(body)[:-8], 'gzip'), decoded(cut, 'deflate')] == [body, cut]
    # A coding this can't undo, and a body that isn't what its header says, come back as they were sent.
    assert [decoded(b'\x8b\x01', 'compress'), decoded(body, 'gzip'), decoded(body, 'deflate')] == [
        b'\x8b\x01',
        body,
        body,
    ]


# --- brotli and zstd ---


def compressed_turns() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    history = [message for n in range(6) for message in (user(f'question {n}'), assistant(f'answer {n}'))]
    bodies = [{'model': 'm', 'messages': history[: 2 * n + 1]} for n in range(6)]
    return bodies, [interaction(CHAT, json.dumps(body).encode()) for body in bodies]


def zstd_frames(data: bytes) -> bytes:
    # Two frames one after another, as a server flushing its stream writes them; neither states its size.
    half = len(data) // 2
    return b''.join(
        zstandard.ZstdCompressor(write_content_size=False).compress(part) for part in (data[:half], data[half:])
    )


def test_bodies_compressed_with_brotli_or_zstd(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    bodies, turns = compressed_turns()
    raw = [json.dumps(body).encode() for body in bodies]
    # As a recorder that kept the compressed bytes writes them: `!!binary`, with the header that names the encoding
    # (a body encoded twice lists both, the first applied first).
    compressed: list[bytes] = [
        brotli.compress(raw[0]),
        zstd_frames(raw[1]),
        zstandard.ZstdCompressor().compress(brotli.compress(raw[2])),
    ]
    # Then bodies the recorder decompressed though it kept the header, as vcrpy tolerates.
    recorded = [*compressed, *(data.decode() for data in raw[3:])]
    for turn, body, encoding in zip(turns, recorded, ['br', 'zstd', 'br, zstd', 'zstd', 'br', 'deflate'], strict=True):
        turn['request'].update(headers={'content-encoding': [encoding]}, body=body)
    reply = {'id': 'resp_1', 'output': [assistant('b')]}
    responses = [
        interaction(RESPONSES, {'model': 'm', 'input': [user('a')]}, zstd_frames(json.dumps(reply).encode())),
        interaction(RESPONSES, {'model': 'm', 'previous_response_id': 'resp_1', 'input': [user('c')]}),
    ]
    responses[0]['response']['headers']['content-encoding'] = ['zstd']
    file = write_cassette(tmp_path / 'compressed.yaml', [*turns, *responses])
    assert file.read_text().count('!!binary') == 4
    status, out, _ = run(capsys, '--json', str(file))
    conversations = json.loads(out)['cassettes'][0]['conversations']
    assert (status, [(c['api'], c['interactions'], c['prefix_kept']) for c in conversations]) == (
        0,
        [('openai-chat', [0, 1, 2, 3, 4, 5], True), ('openai-responses', [6, 7], True)],
    )


@pytest.mark.parametrize(
    ('encoding', 'modules', 'package'),
    [('br', ['brotli', 'brotlicffi'], 'brotli'), ('zstd', ['zstandard'], 'zstandard')],
)
def test_without_the_library_an_encoding_needs(
    encoding: str,
    modules: list[str],
    package: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    _, turns = compressed_turns()
    for number in range(2):
        turns[0]['request']['headers'] = {'content-encoding': [encoding]}
        write_cassette(tmp_path / f'{number}.yaml', turns)
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)
    status, out, err = run(capsys, str(tmp_path))
    # Said once, for both files: the cause is the environment's, not an interaction's.
    assert (status, out, err) == (
        2,
        'incomplete: 2 files could not be read (exit status 2)\n',
        (
            f'pydantic-ai-append check: error: {tmp_path / "0.yaml"} and {tmp_path / "1.yaml"}: decoding a body with '
            f"content-encoding '{encoding}' needs {package}, which is not installed: install it with "
            "`pip install 'pydantic-ai-append[testing]'`\n"
        ),
    )


def test_brotlicffi_where_it_is_the_brotli_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    # PyPy has brotlicffi in place of brotli (httpx takes either); this stands in for it with brotli's functions.
    bodies, turns = compressed_turns()
    turns[1]['request']['headers'] = {'content-encoding': ['br']}
    turns[1]['request']['body'] = brotli.compress(json.dumps(bodies[1]).encode())
    stand_in = types.ModuleType('brotlicffi')
    stand_in.__dict__.update(decompress=brotli.decompress, error=brotli.error)
    monkeypatch.setitem(sys.modules, 'brotli', None)
    monkeypatch.setitem(sys.modules, 'brotlicffi', stand_in)
    status, out, _ = run(capsys, str(write_cassette(tmp_path / 'cffi.yaml', turns)))
    assert (status, out.splitlines()[-1]) == (0, '1 conversation in 1 cassette: every one keeps its prefix')
