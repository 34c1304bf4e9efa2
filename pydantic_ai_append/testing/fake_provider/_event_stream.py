"""AWS's binary event-stream framing (`application/vnd.amazon.eventstream`), which Bedrock's ConverseStream answers in.

botocore reads a streamed Converse reply only in this framing, so the fake writes it. Each message is a prelude (the
message's total length and its headers' length, 4 bytes each, big-endian, then a CRC32 of those 8 bytes), the
headers, the payload, and a CRC32 of everything before it. A header is its name's length (1 byte), the name, a value
type (7 for a UTF-8 string, the only type written here), the value's length (2 bytes) and the value: the framing
`botocore.eventstream` parses, checking both CRCs, when it reads a ConverseStream reply.
"""

from __future__ import annotations

import struct
from binascii import crc32
from collections.abc import Mapping

__all__ = ('event_message',)

_STRING = 7
"""The header value type of a UTF-8 string."""


def event_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message with string `headers` and `payload`."""
    encoded = b''
    for name, value in headers.items():
        name_bytes, value_bytes = name.encode(), value.encode()
        encoded += struct.pack('>B', len(name_bytes)) + name_bytes
        encoded += struct.pack('>BH', _STRING, len(value_bytes)) + value_bytes
    # 12 bytes of prelude and 4 of message CRC frame the headers and the payload.
    lengths = struct.pack('>II', 12 + len(encoded) + len(payload) + 4, len(encoded))
    prelude = lengths + struct.pack('>I', crc32(lengths))
    message = prelude + encoded + payload
    return message + struct.pack('>I', crc32(message))
