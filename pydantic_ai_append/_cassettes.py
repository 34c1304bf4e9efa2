"""Reading the cassettes pytest-recording and vcrpy write, for the cassette checker (`python -m pydantic_ai_append`).

A cassette is a YAML document (vcrpy's default serializer) or a JSON one (its `json` serializer) of the same
shape: `interactions`, each a `request` (`method`, `uri`, `body`, `headers`) and a `response` (`status`,
`headers`, `body: {string: ...}`). A body is text, or bytes (YAML `!!binary`) where it isn't UTF-8, such as a
gzip-compressed one; its `content-encoding` header says how it was compressed. YAML is read with PyYAML's safe
loader, which builds nothing but plain data, so a cassette can't run code when it is checked.

Everything that makes a file unreadable is a `CassetteError` naming the file and what is wrong, so the command can
say it in one line.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

CASSETTE_SUFFIXES = ('.yaml', '.yml', '.json')
"""The file name endings of cassettes: a directory is searched for these."""

_MISSING_YAML = (
    'reading a YAML cassette needs PyYAML, which is not installed: '
    "install it with `pip install 'pydantic-ai-append[testing]'`"
)


class CassetteError(Exception):
    """A file the checker can't read as a cassette; the message names the file and says what is wrong."""


def _decompress_gzip(data: bytes) -> bytes:
    return zlib.decompress(data, zlib.MAX_WBITS | 16)


def _decompress_deflate(data: bytes) -> bytes:
    try:
        return zlib.decompress(data)
    except zlib.error:
        # Some servers send raw deflate, without the zlib header the standard asks for.
        return zlib.decompress(data, -zlib.MAX_WBITS)


_DECODERS: Mapping[str, Callable[[bytes], bytes]] = {
    'gzip': _decompress_gzip,
    'x-gzip': _decompress_gzip,
    'deflate': _decompress_deflate,
    'identity': lambda data: data,
}


def _header(headers: object, name: str) -> str | None:
    # vcrpy records each header as a list of values; a hand-written cassette may give a plain string.
    if not isinstance(headers, dict):
        return None
    for key, value in cast('dict[object, object]', headers).items():
        if isinstance(key, str) and key.lower() == name:
            values = cast('list[object]', value) if isinstance(value, list) else [value]
            return ', '.join(str(item) for item in values)
    return None


@dataclass(frozen=True)
class Interaction:
    """One recorded request and its response, with the bodies as recorded (still compressed, if they were)."""

    file: Path
    """The cassette it was read from."""
    index: int
    """Its position among the cassette's interactions, from 0."""
    method: str
    """The HTTP method, upper case."""
    uri: str
    """The request URI as recorded."""
    request: Mapping[str, Any]
    """The recorded request."""
    response: Mapping[str, Any]
    """The recorded response."""

    def _where(self) -> str:
        return f'{self.file}: interaction {self.index} ({self.method} {self.uri})'

    def _decode(self, what: str, body: object, headers: object) -> bytes | None:
        if body is None:
            return None
        if isinstance(body, str):
            data = body.encode()
        elif isinstance(body, bytes):
            data = body
        else:
            raise CassetteError(f'{self._where()}: the {what} body is a {type(body).__name__}, not text or bytes')
        encoding = _header(headers, 'content-encoding')
        for name in reversed([part.strip().lower() for part in (encoding or '').split(',') if part.strip()]):
            decoder = _DECODERS.get(name)
            if decoder is None:
                raise CassetteError(
                    f'{self._where()}: the {what} body has content-encoding {name!r}, which the checker cannot decode'
                )
            try:
                data = decoder(data)
            except zlib.error:
                # vcrpy's `decode_compressed_response` decompresses bodies but some recorders keep the header; as
                # vcrpy does, a body that doesn't decompress is taken as already decompressed.
                break
        return data

    def request_body(self) -> bytes:
        """The request body, decompressed.

        Raises:
            CassetteError: If the request has no body or one that can't be decoded.
        """
        body = self._decode('request', self.request.get('body'), self.request.get('headers'))
        if body is None:
            raise CassetteError(f'{self._where()}: the request has no body')
        return body

    def response_body(self) -> bytes | None:
        """The response body, decompressed, or `None` if none was recorded.

        Raises:
            CassetteError: If the body can't be decoded.
        """
        body = self.response.get('body')
        # vcrpy keeps a response body as `{string: ...}`; cassettes from vcrpy's old httpx stubs keep `content`.
        if isinstance(body, dict):
            body = cast('dict[str, object]', body).get('string')
        elif body is None:
            body = self.response.get('content')
        return self._decode('response', body, self.response.get('headers'))


def _load_yaml(file: Path, text: str) -> object:
    try:
        import yaml
    except ImportError:
        raise CassetteError(f'{file}: {_MISSING_YAML}') from None
    # The C loader when PyYAML was built with libyaml: about ten times faster on a large cassette.
    loader: Any = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # a safe loader: plain data and `!!binary`
    except yaml.constructor.ConstructorError as error:
        reason = ' '.join(str(error).split())
        raise CassetteError(f'{file}: holds YAML the safe loader does not build: {reason}') from None
    except yaml.YAMLError as error:
        reason = ' '.join(str(error).split())
        raise CassetteError(f'{file}: not YAML: {reason}') from None


def _load(file: Path) -> object:
    try:
        text = file.read_text(encoding='utf-8')
    except UnicodeDecodeError as error:
        raise CassetteError(f'{file}: not a text file: {error}') from None
    except OSError as error:
        raise CassetteError(f'{file}: cannot be read: {error.strerror or error}') from None
    if not text.strip():
        raise CassetteError(f'{file}: empty file, not a cassette')
    if file.suffix.lower() == '.json':
        try:
            return json.loads(text)
        except ValueError as error:
            raise CassetteError(f'{file}: not JSON: {error}') from None
    return _load_yaml(file, text)


def read_cassette(file: Path) -> list[Interaction]:
    """Read every interaction of a cassette, in the order recorded.

    A `.json` file is read as vcrpy's JSON serializer writes it, any other as YAML.

    Args:
        file: The cassette.

    Returns:
        Its interactions.

    Raises:
        CassetteError: If the file can't be read, isn't YAML or JSON, or isn't a cassette.
    """
    data = _load(file)
    if not isinstance(data, dict) or not isinstance(cast('dict[str, object]', data).get('interactions'), list):
        found = 'a mapping without an `interactions` list' if isinstance(data, dict) else f'a {type(data).__name__}'
        raise CassetteError(f'{file}: not a cassette: expected a mapping with an `interactions` list, found {found}')
    interactions: list[Interaction] = []
    for index, item in enumerate(cast('list[object]', cast('dict[str, object]', data)['interactions'])):
        request = cast('dict[str, object]', item).get('request') if isinstance(item, dict) else None
        response = cast('dict[str, object]', item).get('response') if isinstance(item, dict) else None
        if not isinstance(request, dict) or not isinstance(response, dict):
            raise CassetteError(f'{file}: not a cassette: interaction {index} is not a `request` and a `response`')
        request = cast('dict[str, Any]', request)
        method, uri = request.get('method'), request.get('uri')
        if not isinstance(method, str) or not isinstance(uri, str):
            raise CassetteError(f'{file}: not a cassette: the request of interaction {index} has no `method` and `uri`')
        interactions.append(Interaction(file, index, method.upper(), uri, request, cast('dict[str, Any]', response)))
    return interactions
