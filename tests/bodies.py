"""Request bodies written by hand for the tests of `pydantic_ai_append.testing` and of the wire wing (`_wire`)."""

from __future__ import annotations

import json


def body(value: object) -> bytes:
    # Spaces after separators, as a client might send them, so the tests show that segments re-encode.
    return json.dumps(value, ensure_ascii=False).encode()
