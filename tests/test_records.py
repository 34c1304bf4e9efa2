"""The record types (`_records`): what a record says of itself, from its fields alone."""

from __future__ import annotations

from inline_snapshot import snapshot

from pydantic_ai_append import InstructionBlock, InstructionDeltaPart


def test_properties():
    delta = InstructionDeltaPart(id='capability:todos:state', content='a', base_hash=None)
    assert (delta.withdrawn, delta.content_hash) == snapshot((False, 'ca978112ca1bbdcafac231b39a23dc4d'))
    assert (InstructionBlock('x', None).content_hash, InstructionBlock('x', 'a').content_hash) == snapshot(
        (None, 'ca978112ca1bbdcafac231b39a23dc4d')
    )
