"""Checks what is actually sent: each request's cache-order segments against the previous request's, byte for byte.

The rest of the guard looks at messages, but a provider caches bytes, and serialization (a model class, a provider
SDK, a new Pydantic AI release) can move bytes the messages hide. So `WireVerifier` sits in the HTTP client the
provider SDK sends through, splits every request to a known API into its cache-order segments (the same split the
prompt tests and the cassette checker make, in `pydantic_ai_append._wire.segments`) and compares them with the previous
request of the same conversation and model before the request leaves. In observe mode a divergence is a warning and a span; in enforce
mode the request is refused and never reaches the provider.
"""

from __future__ import annotations

import functools
import threading
import warnings
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, overload

import httpx2
from pydantic_ai.exceptions import UserError

from .._shared.cache import BoundedCache
from .._wire.botocore_hooks import BotocoreClientT, instrument
from .._wire.conversation import (
    BoundedWireConversation,
    WireConversation,
    continued,
    segments_size,
    starts_conversation,
)
from .._wire.segments import Api, Segment, common_prefix_length, model_of, parse_body, segments
from .._wire.transport import client, current_conversation, reply_body, wrap
from ._errors import WirePrefixDivergenceWarning
from ._wire_divergence import WireDivergence, divergence_of
from ._wire_refusal import refusal_type
from ._wire_span import WIRE, note_unknown_context, request_span
from ._wire_transport import Reply, VerifyingTransport, verify_botocore

if TYPE_CHECKING:
    import httpx

    from .._wire.transport import ClientT, LegacyClientT

VerifierMode: TypeAlias = Literal['observe', 'enforce']
"""What a `WireVerifier` does with a divergent request: warn and send it, or refuse to send it."""

_MODES: tuple[VerifierMode, ...] = ('observe', 'enforce')


@dataclass
class _Chain:
    """The requests one conversation sent so far to one API and model."""

    last: list[Segment]
    """The full segments of the last request sent."""

    sent: int = 1
    """How many requests were sent; the next one's index."""

    window_open: bool = False
    """Whether the next request may move the prefix, as `WireVerifier.open_window` allowed."""

    refused: list[Segment] | None = None
    """The last request refused after `last`: a retry of it (the Groq SDK retries any error) is refused, not counted."""


@dataclass
class WireVerifier:
    """An HTTP client maker whose clients compare every provider request with the previous one before sending it.

    Pass `verifier.http_client()` to the provider of a Pydantic AI model (`OpenAIProvider(http_client=...)`,
    `AnthropicProvider(http_client=...)`, `MistralProvider(http_client=...)`), or
    `verifier.http_client(client_class=httpx.AsyncClient)` to one whose SDK takes a client of the `httpx` package
    (`GroqProvider`, or Hugging Face's `AsyncInferenceClient` through `huggingface_hub.set_async_client_factory`).
    Bedrock's boto3 client sends through botocore, not httpx: `instrument_bedrock` registers the check on its events.
    Each request to the Anthropic Messages, OpenAI Chat Completions or Responses API, to the Chat Completions of
    Mistral, Groq or Hugging Face, to Cohere's v2 Chat, Gemini's `generateContent` or Bedrock's Converse (a `POST` to
    one of `API_PATHS`, see `api_of`) is split into its cache-order segments, Anthropic's `cache_control` markers,
    Bedrock's `cachePoint` blocks and deferred tools dropped and an OpenAI Responses `previous_response_id` or
    `conversation` resolved into the full input, and compared byte for byte with the previous request to the same API
    and model. Other requests pass through untouched.

    One verifier (and one client) serves every conversation of an agent, concurrently, in tasks and threads: each
    conversation's requests to each model form a chain, and the first request of each chain is never compared.
    `AppendInstructions` and `PrefixGuard` name each run's conversation (its `conversation_id`) to the transport;
    without either on the agent, a request joins the most recent chain of its API and model whose last request it
    extends byte for byte, a request with no history (no reply, tool call or tool result, no known
    `previous_response_id`) starts a new chain, and any other request is compared with the chain it shares the
    longest prefix with. It keeps the last request of the most recent `4096` chains (and at most `256 MiB` of
    them); the request after a chain was forgotten starts a new one. It keeps the context of the most recent `4096`
    Responses replies as well (at most `256 MiB`): a request naming a reply it forgot, like one naming a reply it
    never saw, is not compared (so never refused), and the requests after it are compared with it.

    A divergence is added to `divergences` and recorded on the request's span. In `'observe'` mode the request
    is sent and a [`WirePrefixDivergenceWarning`][pydantic_ai_append.guard.WirePrefixDivergenceWarning] is
    given; in `'enforce'` mode the request is not sent, and
    [`WirePrefixDivergenceError`][pydantic_ai_append.guard.WirePrefixDivergenceError] is raised through the
    provider SDK. For a request to the Anthropic API the error is also an `anthropic.AnthropicError`, since the
    Anthropic SDK wraps any other error from its HTTP client in `APIConnectionError` and retries it; as its own
    error it is neither wrapped nor retried. The OpenAI, Mistral, Hugging Face, Cohere and Google GenAI SDKs and
    botocore (which retries only its own connection errors) pass it through as it is. The Groq SDK wraps every error in `APIConnectionError` (Pydantic AI's `ModelConnectionError`, with the refusal
    as the cause of its cause) after retrying: each retry is refused again, and not counted again.

    ```python
    import asyncio

    import httpx2

    from pydantic_ai_append.guard import WirePrefixDivergenceError, WireVerifier

    sent: list[bytes] = []


    def provider(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.content)
        return httpx2.Response(200, json={})


    async def main() -> None:
        verifier = WireVerifier(mode='enforce')
        url = 'https://api.example/v1/chat/completions'
        hello = {'role': 'user', 'content': 'Hello'}
        async with verifier.http_client(transport=httpx2.MockTransport(provider)) as client:
            await client.post(url, json={'model': 'gpt-5.2', 'messages': [hello]})
            await client.post(url, json={'model': 'gpt-5.2', 'messages': [hello, {'role': 'assistant', 'content': 'Hi'}]})
            hi = {'role': 'user', 'content': 'Hi'}
            try:
                await client.post(url, json={'model': 'gpt-5.2', 'messages': [hi, {'role': 'assistant', 'content': 'Hi'}]})
            except WirePrefixDivergenceError as error:
                print(error)
        print(len(sent), [divergence.segment for divergence in verifier.divergences])


    asyncio.run(main())
    #> openai-chat request 2 to model 'gpt-5.2' does not extend request 1 byte for byte: segment 0 (message) differs
    #>   request 1: {"role":"user","content":"Hello"}
    #>   request 2: {"role":"user","content":"Hi"}
    #> Not sent. If it opens a new window (compaction, new instructions), call `open_window()` on the verifier first.
    #> 2 [0]
    ```
    """

    mode: VerifierMode = 'observe'
    """`'observe'` sends a divergent request and warns; `'enforce'` refuses to send it."""

    _: KW_ONLY

    divergences: list[WireDivergence] = field(default_factory=list[WireDivergence], init=False)
    """Every divergence found, in the order the requests were checked, including the ones refused."""

    _chains: BoundedCache[tuple[str | int, Api, str], _Chain] = field(
        default_factory=lambda: BoundedCache[tuple[str | int, Api, str], _Chain](
            max_entries=_CHAINS_KEPT, max_bytes=_CHAIN_BYTES_KEPT
        ),
        init=False,
        repr=False,
    )
    """The requests sent so far, per conversation, API and model: a conversation is its `conversation_id` when a
    capability on the agent names it, or a number for one told apart by its bytes."""

    _unnamed: int = field(default=0, init=False, repr=False)
    """How many conversations were told apart by their bytes: the next one's number."""

    _conversations: dict[Api, WireConversation] = field(
        default_factory=dict[Api, WireConversation], init=False, repr=False
    )
    """Per API, the replies a `previous_response_id` may name, to resolve it (only Responses keeps any): the most
    recent `4096` (and at most `256 MiB` of them)."""

    _replies: list[tuple[list[Segment], Reply]] = field(
        default_factory=list[tuple[list[Segment], Reply]], init=False, repr=False
    )
    """Responses requests sent and their replies' chunks, until a reply is read whole; the client reads each after
    its request was checked, and concurrent conversations' replies may still be streaming."""

    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    """Held while a request is checked: one verifier serves every conversation, in every thread."""

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise UserError(f"WireVerifier mode must be 'observe' or 'enforce', not {self.mode!r}")

    @overload
    def transport(self, inner: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncBaseTransport: ...

    @overload
    def transport(self, inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport: ...

    def transport(self, inner: Any = None) -> Any:
        """Wrap a transport so that each provider request is checked before it goes through.

        It composes the way httpx transports do: give it a transport of your own, or a
        [`WireCapture.transport`][pydantic_ai_append.testing.WireCapture.transport] to keep only what the
        verifier lets through; or give the capture this one to keep every request the client sends.

        Args:
            inner: The transport requests go through once checked, e.g. an `httpx2.MockTransport` standing in for
                a provider; by default a new `httpx2.AsyncHTTPTransport`. Closing the wrapper closes it. A transport
                of the `httpx` package gets an `httpx` wrapper, for the SDKs that take an `httpx.AsyncClient`.

        Returns:
            A new transport, to give an `httpx2.AsyncClient` (an `httpx.AsyncClient` for an `httpx` one).
        """
        return wrap(functools.partial(VerifyingTransport, self._check), inner)

    @overload
    def http_client(
        self,
        *,
        transport: httpx2.AsyncBaseTransport | None = None,
        client_class: type[ClientT] = httpx2.AsyncClient,
        **client_kwargs: Any,
    ) -> ClientT: ...

    @overload
    def http_client(
        self,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        client_class: type[LegacyClientT],
        **client_kwargs: Any,
    ) -> LegacyClientT: ...

    def http_client(
        self, *, transport: Any = None, client_class: type[Any] = httpx2.AsyncClient, **client_kwargs: Any
    ) -> Any:
        """Make an HTTP client that checks each provider request before sending it; the caller closes it.

        Args:
            transport: The transport requests go through once checked, as for `transport`, of the same package as
                `client_class`; by default a new `AsyncHTTPTransport` of that package. Closing the client closes it.
            client_class: `httpx2.AsyncClient`, or `httpx.AsyncClient` for the SDKs that take only that (Groq,
                Cohere, Hugging Face), or a subclass of either.
            **client_kwargs: Passed to `client_class`.

        Returns:
            A new client of `client_class`.

        Raises:
            UserError: If `client_class` is not one of those, or `transport` is of the other package.
        """
        return client(functools.partial(VerifyingTransport, self._check), client_class, transport, client_kwargs)

    def instrument_bedrock(self, client: BotocoreClientT) -> BotocoreClientT:
        """Check each Converse and ConverseStream request a boto3 `bedrock-runtime` client sends, before it is sent.

        botocore sends without an httpx client, so the check is registered on the client's own events (its
        `before-send`; see `pydantic_ai_append._wire.botocore_hooks`). A request botocore retries is checked once.
        Instrumenting a client again does nothing more; hooks of other code on the client (a
        [`WireCapture.instrument_bedrock`][pydantic_ai_append.testing.WireCapture.instrument_bedrock]) see each
        request in the order they were registered, so a capture instrumented after the verifier keeps only what it lets
        through.

        Args:
            client: The client to instrument, in place: `boto3.client('bedrock-runtime')`, or a `BedrockProvider`'s
                `client`.

        Returns:
            `client`, for `BedrockProvider(bedrock_client=...)`.

        Raises:
            UserError: If `client` is not a boto3 `bedrock-runtime` client.
        """
        return instrument(client, functools.partial(verify_botocore, self._check), self)

    def open_window(self, model: str | None = None) -> None:
        """Let the next request move the prefix: a new window opens (compaction, a new instruction window).

        The next request of each chain affected is not compared, and the requests after it are compared with it.

        Called within a run of an agent whose `AppendInstructions` or `PrefixGuard` names its conversation, it opens
        the window of that conversation's chains only; otherwise, of every chain.

        Args:
            model: The model name as the request body has it, to open a window for that model's chain only; by
                default every chain's.
        """
        conversation = current_conversation()
        with self._lock:
            for (chain_conversation, _, chain_model), chain in self._chains.items():
                if (model is None or chain_model == model) and conversation in (None, chain_conversation):
                    chain.window_open = True

    def _check(self, api: Api, path: str, body: bytes) -> Reply | None:
        """Check a request about to be sent, and note it as sent unless refused.

        Returns:
            Where to keep the reply's body, for an OpenAI Responses request whose reply later requests may name.

        Raises:
            WirePrefixDivergenceError: In enforce mode, if the request diverges.
        """
        try:
            request = parse_body(api, body)
        except (ValueError, TypeError):
            # Not a request this module can read; the provider will say what is wrong with it.
            return None
        model = model_of(path, request)
        with self._lock:
            resolver = self._resolver(api)
            resolved = resolver.resolve(body)
            # A `previous_response_id` this verifier never saw (the conversation began before it) or forgot leaves
            # only the request's own segments: nothing to compare them with, but the requests after it are compared
            # with them.
            current = resolved if resolved is not None else segments(api, body)
            key, chain = self._chain_for(api, model, current, request=request, resolved=resolved)
            index = chain.sent if chain is not None else 0
            with request_span(api, model, index) as span:
                previous = chain.last if chain is not None and resolved is not None else []
                reused = common_prefix_length(previous, current)
                compared = chain is not None and resolved is not None and not chain.window_open
                span.set_attribute(WIRE + 'segments', len(current))
                span.set_attribute(WIRE + 'reused_segments', reused)
                span.set_attribute(WIRE + 'compared', compared)
                if resolved is None:
                    note_unknown_context(span, request)
                if compared and chain is not None and reused < len(previous):
                    divergence = divergence_of(api, model, index, previous, current, reused)
                    if chain.refused != current:
                        self.divergences.append(divergence)
                    span.set_attribute(WIRE + 'divergent_segment', divergence.segment)
                    span.set_attribute(WIRE + 'divergent_kind', divergence.kind)
                    if self.mode == 'enforce':
                        chain.refused = current
                        raise refusal_type(api)(f'{divergence.message}\nNot sent. {_WINDOW_HINT}')
                    span.set_level('warn')
                    warnings.warn(f'{divergence.message}\n{_WINDOW_HINT}', WirePrefixDivergenceWarning, stacklevel=2)
            sent = chain.sent + 1 if chain is not None else 1
            # Put again, so a chain in use stays among the kept, with the size of its new last request.
            self._chains.put(key, _Chain(current, sent), size=segments_size(current))
            if api != 'openai-responses':
                return None
            reply = Reply()
            self._replies.append((current, reply))
            del self._replies[:-_PENDING_REPLIES_KEPT]
            return reply

    def _chain_for(
        self, api: Api, model: str, current: list[Segment], *, request: dict[str, Any], resolved: list[Segment] | None
    ) -> tuple[tuple[str | int, Api, str], _Chain | None]:
        """The chain a request belongs to (its key, and the chain if it has one yet), with the lock held."""
        conversation = current_conversation()
        if conversation is not None:
            key = (conversation, api, model)
            return key, self._chains.get(key)
        candidates = [
            (key, chain)
            for key, chain in reversed(self._chains.items())
            if isinstance(key[0], int) and key[1:] == (api, model)
        ]
        # Told apart as the cassette checker tells them, so that both judge a request against the same one.
        starts = starts_conversation(request, resolved)
        index = continued([chain.last for _, chain in candidates], current, starts=starts)
        if index is not None:
            return candidates[index]
        self._unnamed += 1
        return (self._unnamed, api, model), None

    def _resolver(self, api: Api) -> WireConversation:
        """The API's resolver, with every Responses reply the client has read whole since added, with the lock held."""
        if self._replies:
            responses = self._resolver_of(_RESPONSES)
            # A reply not whole yet (another conversation's, still streaming) is tried again at the next request.
            self._replies = [
                (request, reply)
                for request, reply in self._replies
                if not responses.add_response(request, reply_body(reply))
            ]
        return self._resolver_of(api)

    def _resolver_of(self, api: Api) -> WireConversation:
        resolver = self._conversations.get(api)
        if resolver is None:
            resolver = self._conversations[api] = BoundedWireConversation(
                api, max_responses=_RESPONSES_KEPT, max_bytes=_RESPONSE_BYTES_KEPT
            )
        return resolver


_RESPONSES: Api = 'openai-responses'

_CHAINS_KEPT = 4096
"""How many chains (conversation, API and model) a verifier keeps the last request of."""

_CHAIN_BYTES_KEPT = 256 * 1024 * 1024
"""How many bytes of last requests a verifier keeps."""

_RESPONSES_KEPT = 4096
"""How many Responses replies a verifier keeps the context of, for requests naming them by `previous_response_id`;
as many as chains, since a live chain's next request names its last reply."""

_RESPONSE_BYTES_KEPT = 256 * 1024 * 1024
"""How many bytes of those replies' contexts (the input of the request each answered, and its output) it keeps."""

_PENDING_REPLIES_KEPT = 256
"""How many Responses replies a verifier waits for to be read whole (an error reply never is)."""


_WINDOW_HINT = 'If it opens a new window (compaction, new instructions), call `open_window()` on the verifier first.'
