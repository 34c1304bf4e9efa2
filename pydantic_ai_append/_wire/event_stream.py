"""AWS's binary event stream (`application/vnd.amazon.eventstream`), read back into the payloads of its messages.

Bedrock's ConverseStream answers in this framing rather than in server-sent events, so a streamed Bedrock reply as a
capture keeps it, or as a cassette records it (YAML `!!binary`), is these bytes: the usage is the JSON payload of its
`metadata` event. The framing is AWS's, https://docs.aws.amazon.com/transcribe/latest/dg/event-stream.html: each
message is a prelude (its total length and its headers' length, 4 bytes each, big-endian), a CRC32 of the prelude,
the headers, the payload, and a CRC32 of everything before it. Only the payloads are needed, and every Bedrock event
says in its payload what it is (`usage`, `delta`, an exception's `message`), so the headers are skipped, not read.

It is decoded here, with the standard library, rather than by botocore's `EventStreamBuffer`: the checker and the
wire summary read recorded replies where botocore may not be installed (it is no dependency of this package), and the
framing is a few lines. The CRCs are checked, as botocore checks them: a body that does not start with a valid
prelude is no event stream, and a message cut short or corrupted ends what is read of one.
"""

from __future__ import annotations

import struct
from binascii import crc32

__all__ = ('event_payloads',)

_PRELUDE = struct.Struct('>III')
"""A message's total length, its headers' length, and the CRC32 of those 8 bytes."""

_MESSAGE_CRC = 4
"""The bytes of the CRC32 that ends each message."""


def event_payloads(body: bytes) -> list[bytes]:
    """The payload of each whole message of an AWS event stream, in order.

    Args:
        body: A reply body, as the client read it.

    Returns:
        The payloads up to the first message that is cut short or fails a CRC check; none if `body` doesn't start
        with a message (JSON, server-sent events, an empty body).
    """
    payloads: list[bytes] = []
    offset = 0
    while offset + _PRELUDE.size <= len(body):
        total, headers, prelude_crc = _PRELUDE.unpack_from(body, offset)
        message = body[offset : offset + total]
        if not _whole(message, total, headers, prelude_crc):
            break
        payloads.append(message[_PRELUDE.size + headers : -_MESSAGE_CRC])
        offset += total
    return payloads


def _whole(message: bytes, total: int, headers: int, prelude_crc: int) -> bool:
    """Whether `message` is all of a message of `total` bytes, `headers` of them headers, with both CRCs right."""
    if crc32(message[:8]) != prelude_crc or len(message) != total or total < _PRELUDE.size + headers + _MESSAGE_CRC:
        return False
    return crc32(message[:-_MESSAGE_CRC]) == int.from_bytes(message[-_MESSAGE_CRC:], 'big')
