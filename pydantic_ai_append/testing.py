"""Tools to check what an agent actually sends: does each request keep the provider's prompt cache?

Providers cache a prompt by its prefix, in cache order: tools, then system instructions, then the
conversation. Structured comparisons can't prove a prefix is stable, since serialization can move bytes
the structured objects hide, and raw JSON bodies are never byte prefixes of each other (arrays close before
later keys). So this module splits each request body into its cache-order segments, re-encoded
canonically but keeping key order as sent, and checks that every request's segments start with the
previous request's, byte for byte.

`WireCapture` makes an HTTP client for a provider (all of Pydantic AI's `openai` and `anthropic` model
classes take one) that keeps each request and response body; `WireConversation` turns them into segments,
`assert_prefix_stable` checks them, and `prefix_reuse` measures the bytes each request reuses. Use them to
test your own agent's prompts the way this package's own tests do:

```python
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from pydantic_ai_append.testing import WireCapture, assert_prefix_stable

capture = WireCapture()
model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='your-key', http_client=capture.http_client()))
# ... run the agent over several turns ...
assert_prefix_stable(capture.conversation('openai-chat').requests)
```
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, TypeAlias, cast

import httpx2

from ._wire_bytes import TeeStream, excerpt, first_difference

__all__ = (
    'API_PATHS',
    'CACHE_MARKER_KEYS',
    'Api',
    'Exchange',
    'PrefixReuse',
    'Segment',
    'WireCapture',
    'WireConversation',
    'WireExchange',
    'assert_prefix_stable',
    'common_prefix_length',
    'prefix_reuse',
    'segments',
)

Api: TypeAlias = Literal['anthropic', 'openai-chat', 'openai-responses']
"""A provider API whose request bodies can be split: Anthropic Messages, OpenAI Chat Completions or Responses."""

API_PATHS: Mapping[Api, str] = {
    'anthropic': '/v1/messages',
    'openai-chat': '/v1/chat/completions',
    'openai-responses': '/v1/responses',
}
"""The request path of each API."""

CACHE_MARKER_KEYS: Mapping[Api, frozenset[str]] = {
    'anthropic': frozenset({'cache_control'}),
    'openai-chat': frozenset({'prompt_cache_breakpoint'}),
    'openai-responses': frozenset({'prompt_cache_breakpoint'}),
}
"""Keys that mark cache breakpoints rather than carry content; they move every request, so they're dropped."""


class Segment(NamedTuple):
    """One cache-order piece of a request body."""

    kind: str
    """What the piece is: `tool`, `system`, `message` (Anthropic, Chat), `instructions`, `input` or `output`
    (Responses, where `output` is a previous response's output item that `previous_response_id` brings in)."""
    data: bytes
    """The piece as canonical JSON: as sent, key order kept, cache markers dropped, no whitespace."""


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=False, separators=(',', ':'), ensure_ascii=False).encode()


def _without_keys(value: object, keys: frozenset[str]) -> object:
    if isinstance(value, dict):
        items = cast(dict[str, object], value).items()
        return {key: _without_keys(item, keys) for key, item in items if key not in keys}
    if isinstance(value, list):
        return [_without_keys(item, keys) for item in cast(list[object], value)]
    return value


def _pieces(kind: str, value: object, keys: frozenset[str]) -> list[Segment]:
    # A list is one segment per element; a bare value (a string system prompt or input) is one segment.
    if value is None:
        return []
    values = cast(list[object], value) if isinstance(value, list) else [value]
    return [Segment(kind, _canonical(_without_keys(item, keys))) for item in values]


def _parse_body(api: Api, body: bytes) -> dict[str, Any]:
    parsed: object = json.loads(body)
    if not isinstance(parsed, dict):
        raise TypeError(f'{api} request body is not a JSON object: {body[:200]!r}')
    return cast(dict[str, Any], parsed)


def segments(api: Api, body: bytes) -> list[Segment]:
    """Split one request body into its cache-order segments.

    Anthropic: each tool, each `system` block, each message. OpenAI Chat: each tool, each message. OpenAI
    Responses: each tool, `instructions`, each `input` item, taking the body as it is; use `WireConversation`
    to bring in what `previous_response_id` refers to. Keys in `CACHE_MARKER_KEYS` are dropped at any depth.

    Args:
        api: Which provider API the body was sent to.
        body: The raw request body.

    Returns:
        The segments in cache order.

    Raises:
        ValueError: If the body is not JSON.
        TypeError: If the body is JSON but not an object.
    """
    request = _parse_body(api, body)
    keys = CACHE_MARKER_KEYS[api]
    tools = _pieces('tool', request.get('tools'), keys)
    if api == 'anthropic':
        return (
            tools + _pieces('system', request.get('system'), keys) + _pieces('message', request.get('messages'), keys)
        )
    if api == 'openai-chat':
        return tools + _pieces('message', request.get('messages'), keys)
    return (
        tools
        + _pieces('instructions', request.get('instructions'), keys)
        + _pieces('input', request.get('input'), keys)
    )


class Exchange(Protocol):
    """A request body and the response body it got, as `WireExchange` and the fake provider's log keep them."""

    @property
    def request_body(self) -> bytes:
        """The raw request body."""
        ...

    @property
    def response_body(self) -> bytes:
        """The raw response body, JSON or a whole event stream."""
        ...


def _responses_reply(body: bytes) -> tuple[str, list[object]] | None:
    """The id and output items of a Responses reply, JSON or a stream, or `None` if it carries none."""
    try:
        parsed: object = json.loads(body)
    except ValueError:
        parsed = None
    candidates: list[object] = [parsed]
    if parsed is None:
        # A streamed reply: the terminal event (`response.completed`, or `.incomplete`/`.failed`) holds the
        # whole response, so the last event that carries one wins.
        for line in body.decode(errors='replace').splitlines():
            if line.startswith('data:'):
                try:
                    event: object = json.loads(line[5:])
                except ValueError:
                    continue
                if isinstance(event, dict):
                    candidates.append(cast(dict[str, object], event).get('response'))
    for candidate in reversed(candidates):
        if isinstance(candidate, dict):
            response = cast(dict[str, object], candidate)
            response_id, output = response.get('id'), response.get('output')
            if isinstance(response_id, str) and isinstance(output, list):
                return response_id, cast(list[object], output)
    return None


class WireConversation:
    """The segments of each request of one conversation, with `previous_response_id` resolved.

    An OpenAI Responses request naming `previous_response_id` sends only its new input items; the provider
    puts the named response's input and output before them. So each request's full input is the full input of
    the request that response answered, that response's output items, then this request's own input. For the
    other APIs every request is complete already, and responses are not needed.

    ```python
    from pydantic_ai_append.testing import WireConversation, assert_prefix_stable

    conversation = WireConversation('openai-chat')
    conversation.add(b'{"messages": [{"role": "user", "content": "hi"}]}')
    conversation.add(b'{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}')
    assert_prefix_stable(conversation.requests)
    print([len(request) for request in conversation.requests])
    #> [1, 2]
    ```
    """

    def __init__(self, api: Api) -> None:
        """Start an empty conversation.

        Args:
            api: The provider API every request of the conversation goes to.
        """
        self.api: Api = api
        """The provider API every request of the conversation goes to."""
        self.requests: list[list[Segment]] = []
        """Each request's full segments, in the order added."""
        self._contexts: dict[str, list[Segment]] = {}

    @classmethod
    def from_exchanges(cls, api: Api, exchanges: Iterable[Exchange]) -> WireConversation:
        """Build a conversation from exchanges in the order they happened.

        Args:
            api: The provider API every exchange went to.
            exchanges: Request and response bodies, e.g. `WireCapture.exchanges` or `FakeProvider.exchanges`.

        Returns:
            The conversation with every exchange added.
        """
        conversation = cls(api)
        for exchange in exchanges:
            conversation.add(exchange.request_body, exchange.response_body)
        return conversation

    def add(self, request_body: bytes, response_body: bytes | None = None) -> list[Segment]:
        """Add the next request, and the response it got if a later request may name it.

        Args:
            request_body: The raw request body.
            response_body: The raw response body, JSON or the whole event stream; only Responses uses it.

        Returns:
            The request's full segments, also appended to `requests`.

        Raises:
            AssertionError: If the request names a `previous_response_id` no earlier response returned.
        """
        full = self.resolve(request_body)
        if full is None:
            previous = _parse_body(self.api, request_body)['previous_response_id']
            raise AssertionError(
                f'request {len(self.requests)} names previous_response_id {previous!r}, which no earlier response '
                f'in this conversation returned (known: {sorted(self._contexts)}); add the exchange that '
                f'returned it, with its response body'
            )
        if response_body is not None:
            self.add_response(full, response_body)
        self.requests.append(full)
        return full

    def resolve(self, request_body: bytes) -> list[Segment] | None:
        """A request's full segments, with the response its `previous_response_id` names brought in; adds nothing.

        Args:
            request_body: The raw request body.

        Returns:
            The full segments, or `None` if the request names a `previous_response_id` that no response given to
            `add` or `add_response` returned.
        """
        own = segments(self.api, request_body)
        if self.api != 'openai-responses':
            return own
        previous = _parse_body(self.api, request_body).get('previous_response_id')
        if not isinstance(previous, str):
            return own
        if previous not in self._contexts:
            return None
        head = [segment for segment in own if segment.kind in ('tool', 'instructions')]
        return head + self._contexts[previous] + [segment for segment in own if segment.kind == 'input']

    def add_response(self, request: Sequence[Segment], response_body: bytes) -> None:
        """Remember the response a request got, so that later requests naming it by `previous_response_id` resolve.

        Only Responses replies are kept; a body that carries no response id and output items (an error, a stream
        cut short) is ignored.

        Args:
            request: The full segments of the request the response answered, as `resolve` returned them.
            response_body: The raw response body, JSON or the whole event stream.
        """
        if self.api != 'openai-responses' or (reply := _responses_reply(response_body)) is None:
            return
        response_id, output = reply
        full_input = [segment for segment in request if segment.kind in ('input', 'output')]
        self._contexts[response_id] = full_input + _pieces('output', output, CACHE_MARKER_KEYS[self.api])


def common_prefix_length(earlier: Sequence[Segment], later: Sequence[Segment]) -> int:
    """How many segments, from the start, `later` repeats of `earlier` byte for byte."""
    count = 0
    for before, after in zip(earlier, later, strict=False):
        if before != after:
            break
        count += 1
    return count


def _divergence_message(index: int, earlier: Sequence[Segment], later: Sequence[Segment], position: int) -> str:
    head = f'request {index} does not extend request {index - 1} byte for byte: '
    hint = f'\n(if request {index} opens a new window, pass new_windows=({index},))'
    before = earlier[position]
    if position >= len(later):
        return (
            f'{head}it ends after {len(later)} segments, where request {index - 1} goes on with segment {position} '
            f'({before.kind}): {excerpt(before.data, 0)}{hint}'
        )
    after = later[position]
    offset = first_difference(before.data, after.data)
    return (
        f'{head}first divergent segment is {position} ({before.kind} in request {index - 1}, {after.kind} in request '
        f'{index}), at byte {offset} of it\n'
        f'  request {index - 1}: {excerpt(before.data, offset)}\n'
        f'  request {index}: {excerpt(after.data, offset)}{hint}'
    )


def assert_prefix_stable(requests: Sequence[Sequence[Segment]], *, new_windows: Collection[int] = ()) -> None:
    """Assert that each request's segments start with the previous request's, byte for byte.

    Args:
        requests: Each request's segments in order, e.g. `WireConversation.requests`.
        new_windows: Indices of requests allowed to move the prefix, where a new window opens.

    Raises:
        AssertionError: Naming the first request that breaks the prefix, its first divergent segment's index and
            kind, and an excerpt of both sides from the first differing byte.
    """
    for index in range(1, len(requests)):
        if index in new_windows:
            continue
        earlier, later = requests[index - 1], requests[index]
        position = common_prefix_length(earlier, later)
        if position < len(earlier):
            raise AssertionError(_divergence_message(index, earlier, later, position))


@dataclass(frozen=True)
class PrefixReuse:
    """How much of one request its predecessor already sent, in segment bytes."""

    index: int
    """The request's position, from 0."""
    reused_bytes: int
    """Bytes of the segments it shares, from the start, with the previous request (0 for the first request)."""
    new_bytes: int
    """Bytes of the segments after those."""
    total_bytes: int
    """Bytes of all its segments."""


def prefix_reuse(requests: Sequence[Sequence[Segment]]) -> list[PrefixReuse]:
    """Measure, per request, the bytes reused from the previous request's prefix and the new ones.

    Args:
        requests: Each request's segments in order, e.g. `WireConversation.requests`.

    Returns:
        One `PrefixReuse` per request.
    """
    report: list[PrefixReuse] = []
    previous: Sequence[Segment] = ()
    for index, current in enumerate(requests):
        shared = common_prefix_length(previous, current)
        reused = sum(len(segment.data) for segment in current[:shared])
        total = sum(len(segment.data) for segment in current)
        report.append(PrefixReuse(index, reused, total - reused, total))
        previous = current
    return report


@dataclass
class WireExchange:
    """One request sent through a `WireCapture` client, and the response body as the client read it."""

    method: str
    """The HTTP method."""
    path: str
    """The URL path, without the query."""
    request_body: bytes
    """The raw request body, exactly as sent."""
    response_chunks: list[bytes] = field(default_factory=list[bytes])
    """The response body's chunks as the client consumed them; complete once the client has read it all."""

    @property
    def response_body(self) -> bytes:
        """The response body read so far."""
        return b''.join(self.response_chunks)


class _CapturingTransport(httpx2.AsyncBaseTransport):
    # Wrapping (not subclassing) `AsyncHTTPTransport` keeps vcrpy's class-level patch of it in the path, so
    # what's kept is what the client sent in this run, whether vcrpy replays, records or is off.
    def __init__(self, exchanges: list[WireExchange], inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()
        self._exchanges = exchanges

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        exchange = WireExchange(request.method, request.url.path, await request.aread())
        self._exchanges.append(exchange)
        response = await self._inner.handle_async_request(request)
        if response.is_stream_consumed:
            # A response made from bytes (as `httpx2.MockTransport` handlers make them) was read when it was
            # built, so the client takes its content and never pulls the stream through a tee.
            exchange.response_chunks.append(response.content)
            return response
        # The SDKs stream replies, so the body is kept as they read it rather than read here, which would
        # buffer the stream and change when the client sees each event.
        response.stream = TeeStream(cast(httpx2.AsyncByteStream, response.stream), exchange.response_chunks)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class WireCapture:
    """Keeps every exchange made through its HTTP clients, to judge what the client sent in this run.

    With vcrpy replaying a cassette, the cassette holds the bodies of the run that recorded it, which may
    differ (another Pydantic AI release, say); this keeps the bodies of the current run.

    ```python
    import asyncio

    import httpx2

    from pydantic_ai_append.testing import WireCapture

    reply = {'id': 'r1', 'object': 'chat.completion', 'created': 0, 'model': 'gpt-5.2', 'choices': []}


    async def main() -> None:
        capture = WireCapture()
        transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json=reply))
        async with capture.http_client(transport=transport) as client:
            await client.post('https://api.example/v1/chat/completions', json={'messages': []})
        print([(exchange.path, exchange.request_body) for exchange in capture.exchanges])
        #> [('/v1/chat/completions', b'{"messages":[]}')]


    asyncio.run(main())
    ```
    """

    def __init__(self) -> None:
        """Start with no exchanges."""
        self.exchanges: list[WireExchange] = []
        """Every exchange through this capture's clients, in the order the requests were sent."""

    def http_client(
        self, *, transport: httpx2.AsyncBaseTransport | None = None, **client_kwargs: Any
    ) -> httpx2.AsyncClient:
        """Make an HTTP client whose exchanges are kept in `exchanges`; the caller closes it.

        Args:
            transport: The transport the exchanges go through, such as an `httpx2.MockTransport` standing in
                for a provider; by default a new `httpx2.AsyncHTTPTransport`. Closing the client closes it.
            **client_kwargs: Passed to `httpx2.AsyncClient`.

        Returns:
            A new client.
        """
        return httpx2.AsyncClient(transport=_CapturingTransport(self.exchanges, transport), **client_kwargs)

    def conversation(self, api: Api) -> WireConversation:
        """The conversation made of the exchanges sent to one API, in order.

        Args:
            api: The provider API; exchanges are picked by their path ending in `API_PATHS[api]`.

        Returns:
            A `WireConversation` of those exchanges.
        """
        path = API_PATHS[api]
        return WireConversation.from_exchanges(api, (e for e in self.exchanges if e.path.endswith(path)))
