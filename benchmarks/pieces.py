"""The cost of the pieces on their own: recording and rendering one change, and verifying a long prefix.

- Recording a one-line edit to a 15 KB block computes its diff, once, when the change is recorded.
- Rendering turns a change into its element: the full `<context>` replacement or the `<context-diff>`; history keeps
  the element, so it is rendered once.
- Verifying a prefix compares a request's cache-order segments with the previous request's, byte for byte, as
  [`assert_prefix_stable`][pydantic_ai_append.testing.assert_prefix_stable] does; the previous request is 1 MB.
  Splitting a 1 MB body into its segments (parsing and re-encoding the JSON) is timed apart, since a check of
  a live request pays it once per request whatever the prefix's length.
- Checking a window's baseline (the scenario's three blocks, the static instructions as a digest) is what each request
  pays without the `baselines` cache; reading it again from an equal payload, loaded afresh from JSON, is what a
  request pays with it. The same again with each block 70 times as long (about 1 MB): a check grows with the text.
- Pricing a model's cache (three prices from `genai-prices`) is what each request a window carries changes on pays
  without the `cache prices` cache; with it, a lookup.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic_ai.messages import ModelResponse

from pydantic_ai_append._diff import diff_hunks
from pydantic_ai_append._encoding import decode_record, encode_baseline, read_baseline
from pydantic_ai_append._records import InstructionBaselinePart, InstructionBlock, InstructionDigest
from pydantic_ai_append._rendering import change_text, context_element, diff_element
from pydantic_ai_append._shared.prices import looked_up, prices_of
from pydantic_ai_append._wire.segments import segments
from pydantic_ai_append.testing import Segment, assert_prefix_stable

from .scenario import BLOCKS, STATIC_INSTRUCTIONS, memory

__all__ = ('PieceTiming', 'time_pieces')

PREFIX_BYTES = 1_000_000


@dataclass(frozen=True)
class PieceTiming:
    """One piece's median time, and the size of what it worked on."""

    name: str
    microseconds: float
    bytes: int


def _median_us(action: Callable[[], object], repeats: int) -> float:
    times: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def _long_conversation() -> tuple[bytes, list[Segment], list[Segment]]:
    """A Chat body of about 1 MB, its segments, and the segments of the request after it, split separately."""
    messages = [{'role': 'system', 'content': memory(1)}]
    turn = 0
    while len(json.dumps(messages)) < PREFIX_BYTES:
        turn += 1
        messages.append({'role': 'user', 'content': f'Turn {turn}: ' + 'what should I do next? ' * 20})
        messages.append({'role': 'assistant', 'content': f'Answer {turn}: ' + 'do the next task. ' * 20})
    body = json.dumps({'model': 'gpt-5.2', 'messages': messages}).encode()
    later = json.dumps({'model': 'gpt-5.2', 'messages': [*messages, {'role': 'user', 'content': 'and now?'}]})
    return body, segments('openai-chat', body), segments('openai-chat', later.encode())


def _baseline(repeats: int = 1) -> dict[str, object]:
    """The stored baseline of the scenario's window at its first turn, each block's text `repeats` times over."""
    blocks = [
        InstructionBlock(id=f'capability:scenario:{name}', content=function(1) * repeats) for name, function in BLOCKS
    ]
    digest = InstructionDigest.of(id='agent', dynamic=False, content=STATIC_INSTRUCTIONS)
    return encode_baseline(InstructionBaselinePart(instructions=(digest, *blocks)))


def _baseline_pieces(name: str, stored: dict[str, object], repeats: int) -> list[PieceTiming]:
    """Checking `stored`, and reading it again from an equal payload loaded afresh once it was checked."""
    loaded = json.loads(json.dumps(stored))
    read_baseline(stored, key=None, conversation_id='pieces')
    size = len(json.dumps(stored))
    return [
        PieceTiming(f'check {name}', _median_us(lambda: decode_record(stored), repeats), size),
        PieceTiming(
            f'read {name} already checked',
            _median_us(lambda: read_baseline(loaded, key=None, conversation_id='pieces'), repeats),
            size,
        ),
    ]


def time_pieces(repeats: int) -> list[PieceTiming]:
    """Time each piece `repeats` times and take the medians."""
    block_id = 'capability:scenario:memory'
    before, after = memory(3), memory(4)
    assert change_text(block_id, before, after).startswith('<context-diff'), 'a one-line edit is sent as a diff'
    diff = diff_hunks(before, after)
    body, earlier, later = _long_conversation()
    served = ModelResponse(parts=[], model_name='claude-sonnet-4-6', provider_name='anthropic')
    prefix_bytes = sum(len(segment.data) for segment in earlier)
    return [
        PieceTiming(
            'record a one-line edit (diff)',
            _median_us(lambda: change_text(block_id, before, after), repeats),
            len(after),
        ),
        PieceTiming(
            'render the full element', _median_us(lambda: context_element(block_id, after), repeats), len(after)
        ),
        PieceTiming('render the diff element', _median_us(lambda: diff_element(block_id, diff), repeats), len(diff)),
        PieceTiming(
            'verify a 1 MB prefix', _median_us(lambda: assert_prefix_stable([earlier, later]), repeats), prefix_bytes
        ),
        *_baseline_pieces('a window baseline', _baseline(), repeats),
        # Large repository context: the cost of a check grows with the blocks' text, a read of one checked doesn't.
        *_baseline_pieces('a 1 MB window baseline', _baseline(70), max(3, repeats // 10)),
        PieceTiming(
            'split a 1 MB body into segments',
            _median_us(lambda: segments('openai-chat', body), max(3, repeats // 10)),
            len(body),
        ),
        PieceTiming("price a model's cache", _median_us(lambda: looked_up(served), repeats), 0),
        PieceTiming("price a model's cache, kept", _median_us(lambda: prices_of(served), repeats), 0),
    ]
