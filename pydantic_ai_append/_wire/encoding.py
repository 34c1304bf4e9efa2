"""A body as it came over the wire, with its `content-encoding` undone: teed replies and bodies cassettes record.

Real providers compress their JSON replies. A reply a transport wrapper tees is the body before the client undoes
its encoding, and a recorder may keep a body compressed, so the wrappers and the cassette checker undo it here, the
way httpx does for the client: gzip, deflate (with the zlib header or without it), `br` (brotli) and `zstd`. The last
two need the libraries httpx uses for them, `brotli` (or `brotlicffi`) and `zstandard`, which the package doesn't
declare (the `testing` extra does): they are imported only when a body needs them, and their absence is said.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Any


class UnknownCoding(Exception):
    """A `content-encoding` names a coding that isn't decoded here.

    Attributes:
        coding: The coding, in lower case.
    """

    def __init__(self, coding: str) -> None:
        super().__init__(coding)
        self.coding = coding


class MissingDecoder(Exception):
    """The library that decodes a coding is not installed.

    Attributes:
        coding: The coding.
        package: The package to install for it.
    """

    def __init__(self, coding: str, package: str) -> None:
        super().__init__(coding, package)
        self.coding = coding
        self.package = package


class _NotCompressed(Exception):
    """The body doesn't decompress with the coding its header names."""


def _inflate(data: bytes, wbits: int) -> bytes:
    # A decompressor object, unlike `zlib.decompress`, gives what decodes of a body cut short (a reply still being
    # read) instead of failing on it, as the client's own decoder does.
    try:
        return zlib.decompressobj(wbits).decompress(data)
    except zlib.error:
        raise _NotCompressed from None


def _gzip(data: bytes) -> bytes:
    return _inflate(data, zlib.MAX_WBITS | 16)


def _deflate(data: bytes) -> bytes:
    try:
        return _inflate(data, zlib.MAX_WBITS)
    except _NotCompressed:
        pass
    # Some servers send raw deflate, without the zlib header the standard asks for. With no header to tell it from
    # text that was never compressed, it counts only if it decodes to its end.
    decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        data = decompressor.decompress(data)
    except zlib.error:
        raise _NotCompressed from None
    if not decompressor.eof:
        raise _NotCompressed
    return data


def _brotli(data: bytes) -> bytes:
    # Imported here: neither is in the standard library, and only a `br` body needs one. httpx takes either.
    try:
        import brotli  # pyright: ignore[reportMissingTypeStubs]
    except ImportError:
        try:
            import brotlicffi as brotli  # pyright: ignore[reportMissingImports]
        except ImportError:
            raise MissingDecoder('br', 'brotli') from None
    library: Any = brotli
    try:
        return library.decompress(data)
    except library.error:
        raise _NotCompressed from None


def _zstd(data: bytes) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise MissingDecoder('zstd', 'zstandard') from None
    frames: list[bytes] = []
    try:
        # A body may be several frames, one after another; a decompressor object reads one and keeps the rest.
        while data:
            decompressor = zstandard.ZstdDecompressor().decompressobj()
            frames.append(decompressor.decompress(data))
            data = decompressor.unused_data
    except zstandard.ZstdError:
        raise _NotCompressed from None
    return b''.join(frames)


_DECODERS: Mapping[str, Callable[[bytes], bytes]] = {
    'gzip': _gzip,
    'x-gzip': _gzip,
    'deflate': _deflate,
    'br': _brotli,
    'zstd': _zstd,
    'identity': lambda data: data,
}


def decode(body: bytes, content_encoding: str | None) -> bytes:
    """Undo the codings `content_encoding` lists (in the order they were applied, so the last is undone first).

    A body that doesn't decompress with a coding its header names is taken as decoded from there on: vcrpy's
    `decode_compressed_response` decompresses bodies but some recorders keep the header, and vcrpy reads them so.

    Args:
        body: The body as sent.
        content_encoding: Its `content-encoding` header, or `None` if it has none.

    Returns:
        The body decoded.

    Raises:
        UnknownCoding: If a coding is none of gzip, x-gzip, deflate, br, zstd and identity.
        MissingDecoder: If decoding needs a library that is not installed.
    """
    codings = [coding.strip().lower() for coding in (content_encoding or '').split(',')]
    for coding in reversed([coding for coding in codings if coding]):
        decoder = _DECODERS.get(coding)
        if decoder is None:
            raise UnknownCoding(coding)
        try:
            body = decoder(body)
        except _NotCompressed:
            break
    return body


def decoded(body: bytes, content_encoding: str | None) -> bytes:
    """`body` decoded as `decode` does, or as it was sent if a coding can't be undone here.

    For the transport wrappers: a reply they can't decode is still the client's to read, and whoever reads it from
    them finds no JSON or events in it, as in any unreadable body.
    """
    try:
        return decode(body, content_encoding)
    except (UnknownCoding, MissingDecoder):
        return body
