"""HTTP clients (and boto3 clients) that keep every request and reply a provider SDK exchanges, to judge what this run
sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

import httpx2

from .._wire.botocore_hooks import BotocoreClientT, BotocoreRequest, instrument
from .._wire.conversation import WireConversation
from .._wire.segments import Api, api_of
from .._wire.transport import SentRequest, TeeTransport, client, reply_body, wrap

if TYPE_CHECKING:
    import httpx

    from .._wire.transport import ClientT, LegacyClientT


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
    """The response body's chunks as the client consumed them, before `content_encoding` is undone; complete once
    the client has read it all."""

    content_encoding: str | None = None
    """The response's `content-encoding` header, which `response_chunks` are encoded with; `None` if they are not."""

    user_agent: str | None = None
    """The request's `User-Agent` header, which tells the API apart where SDKs share a path (Mistral's and Hugging
    Face's post to OpenAI Chat's)."""

    @property
    def response_body(self) -> bytes:
        """The response body read so far, with its `content_encoding` undone (gzip, deflate, br or zstd)."""
        return reply_body(self)


class _CapturingTransport(TeeTransport):
    """A transport that keeps every exchange through it in `exchanges`."""

    def __init__(self, exchanges: list[WireExchange], inner: httpx2.AsyncBaseTransport | None = None) -> None:
        super().__init__(inner)
        self._exchanges = exchanges

    async def note(self, request: SentRequest) -> WireExchange:
        body = await request.aread()
        exchange = WireExchange(request.method, request.url.path, body, user_agent=request.headers.get('user-agent'))
        self._exchanges.append(exchange)
        return exchange


class WireCapture:
    """Keeps every exchange made through its HTTP clients, to judge what the client sent in this run.

    Bedrock's boto3 client sends through botocore, not httpx: `instrument_bedrock` keeps its exchanges the same way.

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

    @overload
    def transport(self, inner: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncBaseTransport: ...

    @overload
    def transport(self, inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport: ...

    def transport(self, inner: Any = None) -> Any:
        """Wrap a transport so that every exchange through it is kept in `exchanges`.

        It composes the way httpx transports do: wrap a
        [`WireVerifier.transport`][pydantic_ai_append.guard.WireVerifier.transport] to keep every request the
        client sends, refused ones included, or give the verifier this one to keep only what it lets through.

        Args:
            inner: The transport the exchanges go through, such as an `httpx2.MockTransport` standing in for a
                provider, or a transport of your own; by default a new `httpx2.AsyncHTTPTransport`. Closing the
                wrapper closes it. A transport of the `httpx` package gets an `httpx` wrapper.

        Returns:
            A new transport, to give an `httpx2.AsyncClient` (an `httpx.AsyncClient` for an `httpx` one).
        """
        return wrap(self._capturing, inner)

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
        """Make an HTTP client whose exchanges are kept in `exchanges`; the caller closes it.

        Args:
            transport: The transport the exchanges go through, as for `transport`, of the same package as
                `client_class`; by default a new `AsyncHTTPTransport` of that package. Closing the client closes it.
            client_class: `httpx2.AsyncClient`, or `httpx.AsyncClient` for the SDKs that take only that (Groq,
                Cohere, Hugging Face), or a subclass of either.
            **client_kwargs: Passed to `client_class`.

        Returns:
            A new client of `client_class`.

        Raises:
            UserError: If `client_class` is not one of those, or `transport` is of the other package.
        """
        return client(self._capturing, client_class, transport, client_kwargs)

    def instrument_bedrock(self, client: BotocoreClientT) -> BotocoreClientT:
        """Keep every Converse and ConverseStream exchange a boto3 `bedrock-runtime` client makes in `exchanges`.

        botocore sends without an httpx client, so the capture is registered on the client's own events (see
        `pydantic_ai_append._wire.botocore_hooks`). Each attempt botocore sends is kept, a retry too, with the reply
        the client read to it: a ConverseStream reply is AWS's binary event stream, kept as it came. Instrumenting a
        client again does nothing more; other code's hooks on the client (a
        [`WireVerifier.instrument_bedrock`][pydantic_ai_append.guard.WireVerifier.instrument_bedrock]) see each
        request in the order they were registered, so a capture instrumented before the verifier keeps the requests it
        refuses too.

        Args:
            client: The client to instrument, in place: `boto3.client('bedrock-runtime')`, or a `BedrockProvider`'s
                `client`.

        Returns:
            `client`, for `BedrockProvider(bedrock_client=...)`.

        Raises:
            UserError: If `client` is not a boto3 `bedrock-runtime` client.
        """
        return instrument(client, self._capture_botocore, self)

    def _capturing(self, inner: httpx2.AsyncBaseTransport | None) -> _CapturingTransport:
        return _CapturingTransport(self.exchanges, inner)

    def _capture_botocore(self, request: BotocoreRequest) -> WireExchange:
        exchange = WireExchange(
            request.method, request.path, request.body, user_agent=request.headers.get('user-agent')
        )
        self.exchanges.append(exchange)
        return exchange

    def conversation(self, api: Api) -> WireConversation:
        """The conversation made of the exchanges sent to one API, in order.

        Args:
            api: The provider API; exchanges are picked by method and path, a `POST` to a path ending in the API's.

        Returns:
            A `WireConversation` of those exchanges.
        """
        exchanges = [
            exchange
            for exchange in self.exchanges
            if api_of(exchange.method, exchange.path, exchange.user_agent) == api
        ]
        return WireConversation.from_exchanges(api, exchanges)
