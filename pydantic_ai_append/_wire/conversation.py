"""One conversation's requests as the provider sees them, with OpenAI Responses `previous_response_id` and
`conversation` resolved.

A Responses request that names `previous_response_id` sends only its new input; the provider puts the named
response's input and output before it. One that names a `conversation` (`"conv_..."` or `{"id": "conv_..."}`) sends
only its new input too: the provider prepends the conversation's items, which are the items it was created with,
then each earlier response's input and output items, added when that response completed (the `conversation`
parameter of https://platform.openai.com/docs/api-reference/responses/create, and
https://platform.openai.com/docs/guides/conversation-state). Checking such a request's prefix needs the full input,
rebuilt from the replies seen earlier. The test-time checker and the runtime verifier both rebuild it, so it lives
here once, with the rule both tell conversations apart by (`starts_conversation`, `continued`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, cast

from .._shared.cache import BoundedCache
from .event_stream import event_payloads
from .segments import CACHE_MARKER_KEYS, Api, Segment, common_prefix_length, parse_body, pieces, segments


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


def reply_payloads(body: bytes) -> list[dict[str, object]]:
    """The JSON objects a reply body holds: the body itself, or each event of a server-sent event stream or of AWS's
    binary event stream (Bedrock's ConverseStream, `event_stream`).

    A body that is none of these (empty, cut short, an HTML error page) holds none, and an event whose data isn't a
    JSON object (`[DONE]`) is skipped.
    """
    try:
        parsed: object = json.loads(body)
    except ValueError:
        parsed = None
    if parsed is not None:
        return [cast('dict[str, object]', parsed)] if isinstance(parsed, dict) else []
    events: list[bytes | str] = [*event_payloads(body)]
    if not events:
        events = [line[5:] for line in body.decode(errors='replace').splitlines() if line.startswith('data:')]
    payloads: list[dict[str, object]] = []
    for data in events:
        try:
            event: object = json.loads(data)
        except ValueError:
            continue
        if isinstance(event, dict):
            payloads.append(cast('dict[str, object]', event))
    return payloads


def conversation_id(value: object) -> str | None:
    """The id a Responses `conversation` field names, as a string or as `{"id": ...}`, or `None` if it names none."""
    if isinstance(value, dict):
        value = cast('dict[str, object]', value).get('id')
    return value if isinstance(value, str) else None


def _responses_reply(body: bytes) -> tuple[str, list[object], str | None] | None:
    """The id, output items and conversation id of a Responses reply, JSON or a stream, or `None` if it carries none."""
    # In a stream the terminal event (`response.completed`, or `.incomplete`/`.failed`) holds the whole response,
    # so the last event that carries one wins.
    candidates = [item for payload in reply_payloads(body) for item in (payload, payload.get('response'))]
    for candidate in reversed(candidates):
        if isinstance(candidate, dict):
            response = cast('dict[str, object]', candidate)
            response_id, output = response.get('id'), response.get('output')
            if isinstance(response_id, str) and isinstance(output, list):
                return response_id, cast('list[object]', output), conversation_id(response.get('conversation'))
    return None


class WireConversation:
    """The segments of each request of one conversation, with `previous_response_id` and `conversation` resolved.

    An OpenAI Responses request naming `previous_response_id` sends only its new input items; the provider
    puts the named response's input and output before them. So each request's full input is the full input of
    the request that response answered, that response's output items, then this request's own input. A request
    naming a `conversation` is resolved the same way from the conversation's items: those it was created with
    (`add_conversation_items`), then, for each response the conversation returned (a reply whose `conversation` names
    it), the full input of its request and its output items. For the other APIs every request is complete already,
    and responses are not needed.

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
        # Unbounded here: a test's or a cassette's conversation is short, and a reply forgotten would turn into a
        # false "no earlier response returned it". The verifier, which runs for the life of a server, bounds it.
        self._contexts = BoundedCache[str, list[Segment]](max_entries=sys.maxsize, max_bytes=sys.maxsize)
        # Each conversation's items, by conversation id, bounded as the replies are.
        self._conversations = BoundedCache[str, list[Segment]](max_entries=sys.maxsize, max_bytes=sys.maxsize)

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

        A request naming a `conversation` nothing added so far belongs to (created, and its first responses returned,
        outside what was captured) is taken as it is: the conversation's earlier items are a prefix every later
        request repeats too.

        Args:
            request_body: The raw request body.
            response_body: The raw response body, JSON or the whole event stream; only Responses uses it.

        Returns:
            The request's full segments, also appended to `requests`.

        Raises:
            AssertionError: If the request names a `previous_response_id` no earlier response returned.
        """
        full = self.resolve(request_body)
        previous = parse_body(self.api, request_body).get('previous_response_id') if full is None else None
        if full is None and previous is None:
            full = segments(self.api, request_body)
        if full is None:
            raise AssertionError(
                f'request {len(self.requests)} names previous_response_id {previous!r}, which no earlier response '
                f'in this conversation returned (known: {sorted(key for key, _ in self._contexts.items())}); add the '
                f'exchange that returned it, with its response body'
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
            `add` or `add_response` returned, or a `conversation` nothing given to them or to `add_conversation_items`
            belongs to.
        """
        own = segments(self.api, request_body)
        if self.api != 'openai-responses':
            return own
        request = parse_body(self.api, request_body)
        previous, conversation = request.get('previous_response_id'), conversation_id(request.get('conversation'))
        if isinstance(previous, str):
            context = self._contexts.get(previous)
        elif conversation is not None:
            context = self._conversations.get(conversation)
        else:
            return own
        if context is None:
            return None
        head = [segment for segment in own if segment.kind in ('tool', 'instructions')]
        return head + context + [segment for segment in own if segment.kind == 'input']

    def add_response(self, request: Sequence[Segment], response_body: bytes) -> bool:
        """Remember the response a request got, so that later requests naming it by `previous_response_id` resolve.

        Only Responses replies are kept; a body that carries no response id and output items (an error, a stream
        cut short) is ignored. A reply whose `conversation` names a conversation also makes the request's full input
        and the reply's output that conversation's items, for later requests naming it.

        Args:
            request: The full segments of the request the response answered, as `resolve` returned them.
            response_body: The raw response body, JSON or the whole event stream.

        Returns:
            Whether the response was kept.
        """
        if self.api != 'openai-responses' or (reply := _responses_reply(response_body)) is None:
            return False
        response_id, output, conversation = reply
        full_input = [segment for segment in request if segment.kind in ('input', 'output')]
        context = full_input + pieces('output', output, CACHE_MARKER_KEYS[self.api])
        self._contexts.put(response_id, context, size=segments_size(context))
        if conversation is not None:
            self._conversations.put(conversation, context, size=segments_size(context))
        return True

    def add_conversation_items(self, conversation: str, items: object) -> None:
        """Add items to a Responses conversation, as `POST /v1/conversations` (its `items`) or `.../items` does.

        Args:
            conversation: The conversation id, `conv_...`.
            items: The items, as the request body's `items` list has them; anything else adds none.
        """
        kept = cast('list[object]', items) if isinstance(items, list) else []
        added = pieces('input', kept, CACHE_MARKER_KEYS[self.api])
        context = (self._conversations.get(conversation) or []) + added
        self._conversations.put(conversation, context, size=segments_size(context))


def segments_size(kept: Sequence[Segment]) -> int:
    """About the bytes a list of segments takes, counting each segment's data in full even where it is shared."""
    return sum(len(segment.data) + 64 for segment in kept) + 128


class BoundedWireConversation(WireConversation):
    """A conversation that keeps only the most recent `max_responses` replies (and `max_bytes` of their contexts).

    A request naming a `previous_response_id` whose reply was forgotten resolves to `None`, as one naming a reply
    never added does.
    """

    def __init__(self, api: Api, *, max_responses: int, max_bytes: int) -> None:
        """Start an empty conversation.

        Args:
            api: The provider API every request of the conversation goes to.
            max_responses: The most replies it keeps.
            max_bytes: The most bytes of their contexts it keeps, as `segments_size` counts them.
        """
        super().__init__(api)
        self._contexts = BoundedCache[str, list[Segment]](max_entries=max_responses, max_bytes=max_bytes)
        self._conversations = BoundedCache[str, list[Segment]](max_entries=max_responses, max_bytes=max_bytes)


_HISTORY_FREE_ROLES = frozenset({'user', 'system', 'developer'})


def has_history(request: dict[str, Any]) -> bool:
    """Whether a request carries history: a reply, a tool call or result, a previous response, a stored conversation."""
    if request.get('previous_response_id') is not None or request.get('conversation') is not None:
        return True
    for key in ('messages', 'input', 'contents'):  # Gemini's replies are `contents` of role `model`
        items: object = request.get(key)
        if not isinstance(items, list):
            continue
        for item in items:  # pyright: ignore[reportUnknownVariableType]
            if isinstance(item, dict) and (
                item.get('role') not in _HISTORY_FREE_ROLES  # pyright: ignore[reportUnknownMemberType]
                or item.get('type', 'message') != 'message'  # pyright: ignore[reportUnknownMemberType]
            ):
                return True
    return False


def starts_conversation(request: dict[str, Any], resolved: list[Segment] | None) -> bool:
    """Whether a request starts a conversation: it carries no history, or names state nothing seen so far holds.

    Args:
        request: The request body, parsed.
        resolved: Its segments with `previous_response_id` or `conversation` resolved, or `None` if what it names
            was never seen (or was forgotten): then there is nothing to compare it with.
    """
    if resolved is None:
        return True
    if request.get('conversation') is not None and request.get('previous_response_id') is None:
        # A stored conversation holds history only once a response of it was seen: until then, only the items it was
        # created with, like the first request of any conversation.
        return not any(segment.kind == 'output' for segment in resolved) and not has_history(
            {**request, 'conversation': None}
        )
    return not has_history(request)


def continued(lasts: Sequence[Sequence[Segment]], current: Sequence[Segment], *, starts: bool) -> int | None:
    """Which conversation a request continues, of those of its API and model whose last requests are `lasts`.

    The checker and the verifier (where no capability names the conversation) tell conversations apart this way,
    so that they judge the same requests against the same ones.

    Args:
        lasts: Each conversation's last request, the most recent first.
        current: The request's segments.
        starts: Whether the request starts a conversation, as `starts_conversation` says.

    Returns:
        The index in `lasts` of the first conversation whose last request `current` extends byte for byte; else, unless
        the request starts one, of the one it shares the longest prefix with (the most recent on a tie), whose prefix
        it breaks; else `None`, for a new conversation.
    """
    shared: list[int] = []
    for index, last in enumerate(lasts):
        count = common_prefix_length(last, current)
        if count == len(last):
            return index
        shared.append(count)
    if starts or not shared:
        return None
    return shared.index(max(shared))
