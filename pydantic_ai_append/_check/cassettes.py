"""Reading recorded HTTP cassettes, for the cassette checker (`python -m pydantic_ai_append`).

Three recorders' files are read, all YAML (`.json`: vcrpy's JSON serializer) with an `interactions` list, each a
`request` (`method`, `uri`, `headers`, a body) and a `response` (`status`, `headers`, a body):

- vcrpy / pytest-recording: a request body is text, or bytes (YAML `!!binary`) where it isn't UTF-8, such as a
  gzip-compressed one; a response body is `{string: ...}` (or `content`, in cassettes of vcrpy's old httpx stubs).
  Its `content-encoding` header says how a body was compressed: gzip, deflate, `br` (brotli) and `zstd` are decoded
  as the wire wrappers decode replies (`_wire.encoding`).
- Pydantic AI's older vcrpy serializer (its test suite's `json_body_serializer.py`): the same, except that a request or
  response whose `content-type` is `application/json` keeps no `body` but the parsed JSON, under `parsed_body`.
- cassetter, Pydantic AI's current recorder: every body is typed, `{type: json, content: <structure>}`,
  `{type: text, content: '...'}`, `{type: binary, content: '<hex>'}` or `{type: none}`, stored decompressed.

A body kept as structure (`parsed_body`, or cassetter's `json`) is read as that structure written out as compact JSON,
with its keys in the order the file has them. Both Pydantic AI formats write keys sorted, so the checker compares
those requests in sorted key order: a change that only reorders a request's keys can't be seen in such a cassette.

YAML is read with PyYAML's safe loader, which builds nothing but plain data, so a cassette can't run code when it is
checked. Everything that makes a file unreadable is a `CassetteError`, whose `cause` says what is wrong without the
file's name, so that the command says one cause once for all the files it applies to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from .._wire.encoding import MissingDecoder, UnknownCoding, decode
from .._wire.segments import canonical

CASSETTE_SUFFIXES = ('.yaml', '.yml', '.json')
"""The file name endings of cassettes: a directory is searched for these."""

_INSTALL = "install it with `pip install 'pydantic-ai-append[testing]'`"
_MISSING_YAML = f'reading a YAML cassette needs PyYAML, which is not installed: {_INSTALL}'


class CassetteError(Exception):
    """A file the checker can't read as a cassette, or a body in one it can't decode.

    Attributes:
        cause: What is wrong, without the file's name: the same cause in several files is said once.
        file: The file, or `None` for an error in the command's arguments.
    """

    def __init__(self, cause: str, file: Path | None = None) -> None:
        super().__init__(cause if file is None else f'{file}: {cause}')
        self.cause = cause
        self.file = file


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
    """One recorded request and its response, as recorded (a body still compressed, or kept as structure)."""

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

    @property
    def path(self) -> str:
        """The request URI's path, without the query or fragment."""
        return urlsplit(self.uri).path

    @property
    def user_agent(self) -> str | None:
        """The request's recorded `User-Agent` header, which tells some SDKs posting to one path apart."""
        return _header(self.request.get('headers'), 'user-agent')

    def _error(self, message: str) -> CassetteError:
        return CassetteError(f'interaction {self.index} ({self.method} {self.uri}): {message}', self.file)

    def _json(self, what: str, content: object) -> bytes:
        try:
            return canonical(content)
        except (TypeError, ValueError) as error:
            # YAML has values JSON hasn't, such as an unquoted date or `!!binary`.
            raise self._error(
                f'the {what} body is kept as structure that JSON cannot hold ({error}): write each value as JSON has '
                'it (a date, for one, as a quoted string)'
            ) from None

    def _typed(self, what: str, body: Mapping[str, object]) -> bytes | None:
        kind, content = body.get('type'), body.get('content')
        if kind == 'none':
            return None
        if kind == 'json':
            return self._json(what, content)
        if kind in ('text', 'binary') and not isinstance(content, str):
            raise self._error(f'the {what} body of type {kind} has {type(content).__name__} content, not a string')
        if kind == 'text':
            return cast('str', content).encode()
        if kind == 'binary':
            try:
                return bytes.fromhex(cast('str', content))
            except ValueError:
                raise self._error(f'the {what} body of type binary is not hex: {cast("str", content)[:40]!r}') from None
        raise self._error(f'the {what} body has type {kind!r}, not json, text, binary or none (as cassetter writes)')

    def _decode(self, what: str, recorded: Mapping[str, Any], body: object) -> bytes | None:
        if body is None:
            return None
        if isinstance(body, str):
            data = body.encode()
        elif isinstance(body, bytes):
            data = body
        else:
            raise self._error(f'the {what} body is a {type(body).__name__}, not text or bytes')
        encoding = _header(recorded.get('headers'), 'content-encoding')
        try:
            return decode(data, encoding)
        except UnknownCoding as unknown:
            raise self._error(
                f'the {what} body has content-encoding {unknown.coding!r}, which the checker cannot decode'
            ) from None
        except MissingDecoder as missing:
            # Not the interaction's fault: said without it, so that the cause is said once for every file.
            raise CassetteError(
                f'decoding a body with content-encoding {missing.coding!r} needs {missing.package}, which is not '
                f'installed: {_INSTALL}',
                self.file,
            ) from None

    def _body(self, what: str, recorded: Mapping[str, Any], body: object) -> bytes | None:
        # Pydantic AI's serializer reads a `parsed_body` of null as none, and then the `body`: so does the checker.
        if recorded.get('parsed_body') is not None:
            return self._json(what, recorded['parsed_body'])
        if isinstance(body, dict) and 'type' in body:
            return self._typed(what, cast('dict[str, object]', body))
        return self._decode(what, recorded, cast('object', body))

    def request_body(self) -> bytes:
        """The request body, decompressed, or written out as JSON where the cassette keeps it as structure.

        Raises:
            CassetteError: If the request has no body or one that can't be decoded.
        """
        body = self._body('request', self.request, self.request.get('body'))
        if body is None:
            raise self._error('the request has no body')
        return body

    def response_body(self) -> bytes | None:
        """The response body, decompressed or written out as JSON, or `None` if none was recorded.

        Raises:
            CassetteError: If the body can't be decoded.
        """
        body: object = self.response.get('body')
        # vcrpy keeps a response body as `{string: ...}`; cassettes from vcrpy's old httpx stubs keep `content`.
        if isinstance(body, dict) and 'type' not in body:
            body = cast('dict[str, object]', body).get('string')
        elif body is None:
            body = self.response.get('content')
        return self._body('response', self.response, cast('object', body))


def _load_yaml(file: Path, text: str) -> object:
    try:
        import yaml
    except ImportError:
        raise CassetteError(_MISSING_YAML, file) from None
    # The C loader when PyYAML was built with libyaml: about ten times faster on a large cassette.
    loader: Any = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # a safe loader: plain data and `!!binary`
    except yaml.constructor.ConstructorError as error:
        reason = ' '.join(str(error).split())
        raise CassetteError(f'holds YAML the safe loader does not build: {reason}', file) from None
    except yaml.YAMLError as error:
        reason = ' '.join(str(error).split())
        raise CassetteError(f'not YAML: {reason}', file) from None


def _load(file: Path) -> object:
    try:
        text = file.read_text(encoding='utf-8')
    except UnicodeDecodeError as error:
        raise CassetteError(f'not a text file: {error}', file) from None
    except OSError as error:
        raise CassetteError(f'cannot be read: {error.strerror or error}', file) from None
    if not text.strip():
        raise CassetteError('empty file, not a cassette', file)
    if file.suffix.lower() == '.json':
        try:
            return json.loads(text)
        except ValueError as error:
            raise CassetteError(f'not JSON: {error}', file) from None
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
        raise CassetteError(f'not a cassette: expected a mapping with an `interactions` list, found {found}', file)
    interactions: list[Interaction] = []
    for index, item in enumerate(cast('list[object]', cast('dict[str, object]', data)['interactions'])):
        request = cast('dict[str, object]', item).get('request') if isinstance(item, dict) else None
        response = cast('dict[str, object]', item).get('response') if isinstance(item, dict) else None
        if not isinstance(request, dict) or not isinstance(response, dict):
            raise CassetteError(f'not a cassette: interaction {index} is not a `request` and a `response`', file)
        request = cast('dict[str, Any]', request)
        method, uri = request.get('method'), request.get('uri')
        if not isinstance(method, str) or not isinstance(uri, str):
            raise CassetteError(f'not a cassette: the request of interaction {index} has no `method` and `uri`', file)
        interactions.append(Interaction(file, index, method.upper(), uri, request, cast('dict[str, Any]', response)))
    return interactions
