"""What the `prompt_wire` pytest fixture gives a test: a capture of what its agent sends, and the checks on it.

The fixture itself lives in the `pytest_pydantic_ai_append` plugin module, which pytest imports at start-up in every
suite the package is installed in; this module holds everything else, and is imported only when a test asks for
the fixture.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, cast, overload

import httpx2
from pydantic_ai.exceptions import UserError

from .._shared.prices import reads_discounted
from .._telemetry.summary import CacheSummary
from .._wire.botocore_hooks import BotocoreClientT
from .._wire.conversation import WireConversation
from .._wire.segments import API_PATHS, Api, Segment, api_of, model_of, parse_body
from .._wire.transport import unpooled_transport
from .._wire.usage import PROVIDERS
from ._assertions import PrefixReuse, assert_prefix_stable, prefix_reuse
from ._capture import WireCapture, WireExchange
from ._transcript import DEFAULT_FOLD, transcript
from ._wire_summary import wire_summary

if TYPE_CHECKING:
    import httpx

    from .._wire.transport import ClientT, LegacyClientT


class PromptWire:
    """A record of every request a test's agent sends, with its transcript and prefix checks: the `prompt_wire` fixture.

    Hand `http_client()` (or a client built on `transport()`) to the provider of a Pydantic AI model (for Bedrock,
    `BedrockProvider(bedrock_client=prompt_wire.instrument_bedrock(client))`), run the agent, then snapshot
    `transcript()` and call `assert_prefix_stable()`. With pytest-recording replaying a
    cassette, what is recorded and checked is what the agent sends in this run, not the cassette's bodies. Where
    every request went to one API, the `api` arguments can be left out.

    ```python
    import asyncio

    import httpx2
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from pydantic_ai_append.testing import PromptWire


    def openai(request: httpx2.Request) -> httpx2.Response:
        choice = {'index': 0, 'message': {'role': 'assistant', 'content': 'OK.'}, 'finish_reason': 'stop'}
        return httpx2.Response(200, json={'id': 'c1', 'object': 'chat.completion', 'created': 0, 'model': 'gpt-5.2', 'choices': [choice]})


    async def main(prompt_wire: PromptWire) -> None:
        http_client = prompt_wire.http_client(transport=httpx2.MockTransport(openai))
        model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=http_client))
        agent = Agent(model, instructions='Be brief.')
        result = await agent.run('Hello')
        await agent.run('Again', message_history=result.all_messages())


    prompt_wire = PromptWire()  # in a test: the `prompt_wire` fixture, which closes its clients at teardown
    asyncio.run(main(prompt_wire))
    prompt_wire.assert_prefix_stable()
    print(prompt_wire.transcript(), end='')
    #> request 0: reuses 0 of 72 bytes
    #> + system: Be brief.
    #> + user: Hello
    #>
    #> request 1: reuses 72 of 141 bytes
    #>   system: Be brief.
    #>   user: Hello
    #> + assistant: OK.
    #> + user: Again
    prompt_wire.close()
    ```
    """

    def __init__(self) -> None:
        """Start with nothing recorded."""
        self.capture = WireCapture()
        """The capture the clients and transports record into."""
        self._clients: list[httpx2.AsyncClient | httpx.AsyncClient] = []

    def __repr__(self) -> str:
        return f'PromptWire({len(self.exchanges)} exchanges)'

    @property
    def exchanges(self) -> list[WireExchange]:
        """Every exchange recorded, in the order the requests were sent."""
        return self.capture.exchanges

    @overload
    def transport(self, inner: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncBaseTransport: ...

    @overload
    def transport(self, inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport: ...

    def transport(self, inner: Any = None) -> Any:
        """Wrap a transport so that every exchange through it is recorded, as `WireCapture.transport` does.

        Args:
            inner: The transport the exchanges go through: an `httpx2.MockTransport`, a
                [`WireVerifier.transport`][pydantic_ai_append.guard.WireVerifier.transport], one of your own; by
                default a new `httpx2.AsyncHTTPTransport`, which pytest-recording replays and records through. A
                transport of the `httpx` package gets an `httpx` wrapper.

        Returns:
            A new transport, to give an `httpx2.AsyncClient` (an `httpx.AsyncClient` for an `httpx` one); closing
            that closes it.
        """
        # Either overload's, as `inner` is: pyright can't pick one for an `Any`.
        return cast('Any', self.capture.transport(inner))

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
        """Make an HTTP client whose exchanges are recorded, to hand to the provider of a Pydantic AI model.

        The client is closed by `close`, which the fixture calls at teardown, unless the test closed it first.

        Args:
            transport: The transport the exchanges go through, as for `transport`, of the same package as
                `client_class`. The default one keeps no idle connections, so that nothing is left open when the
                test's event loop ends.
            client_class: `httpx2.AsyncClient`, or `httpx.AsyncClient` for the SDKs that take only that (Groq,
                Cohere, Hugging Face), or a subclass of either.
            **client_kwargs: Passed to `client_class`.

        Returns:
            A new client of `client_class`.

        Raises:
            UserError: If `client_class` is not one of those, or `transport` is of the other package.
        """
        if transport is None:
            transport = unpooled_transport(client_class)
        client = self.capture.http_client(transport=transport, client_class=client_class, **client_kwargs)
        self._clients.append(client)
        return client

    def instrument_bedrock(self, client: BotocoreClientT) -> BotocoreClientT:
        """Record every Converse and ConverseStream exchange a boto3 `bedrock-runtime` client makes, as
        [`WireCapture.instrument_bedrock`][pydantic_ai_append.testing.WireCapture.instrument_bedrock] does.

        The client stays the caller's: `close` leaves it open.

        Args:
            client: The client to instrument, in place: `boto3.client('bedrock-runtime')`, or a `BedrockProvider`'s
                `client`.

        Returns:
            `client`, for `BedrockProvider(bedrock_client=...)`.

        Raises:
            UserError: If `client` is not a boto3 `bedrock-runtime` client.
        """
        return self.capture.instrument_bedrock(client)

    def conversation(self, api: Api | None = None) -> WireConversation:
        """The recorded requests to one API, as a `WireConversation` (with `previous_response_id` resolved).

        Args:
            api: One of `Api`, such as `'openai-chat'` or `'bedrock-converse'`; by default the only API requests went
                to.

        Returns:
            A new `WireConversation` of those exchanges.

        Raises:
            UserError: If `api` is not one of those, or is left out while requests went to no API or to several.
        """
        return self.capture.conversation(self._api(api))

    def requests(self, api: Api | None = None) -> list[list[Segment]]:
        """Each recorded request's cache-order segments, as `conversation(api).requests`."""
        return self.conversation(api).requests

    def transcript(self, api: Api | None = None, *, fold: int | None = DEFAULT_FOLD) -> str:
        """The [`transcript`][pydantic_ai_append.testing.transcript] of the requests to one API, for a snapshot.

        Args:
            api: As for `conversation`.
            fold: Texts longer than this many characters are shown as their length and hash; `None` shows all.

        Returns:
            The transcript.
        """
        name = self._api(api)
        return transcript(self.requests(name), fold=fold, reads_discounted=self._reads_discounted(name))

    def assert_prefix_stable(self, api: Api | None = None, *, new_windows: Collection[int] = ()) -> None:
        """Assert that each request to one API starts with the previous one's segments, byte for byte.

        Args:
            api: As for `conversation`.
            new_windows: Indices of requests allowed to move the prefix, where a new window opens.

        Raises:
            AssertionError: Naming the first request that breaks the prefix, its first divergent segment, and both
                sides from the first byte that differs (see
                [`assert_prefix_stable`][pydantic_ai_append.testing.assert_prefix_stable]).
        """
        __tracebackhide__ = True  # pytest shows the failure at the test's call, not inside this package
        name = self._api(api)
        assert_prefix_stable(
            self.requests(name), new_windows=new_windows, reads_discounted=self._reads_discounted(name)
        )

    def prefix_reuse(self, api: Api | None = None) -> list[PrefixReuse]:
        """The bytes each request to one API reuses from the previous one, the new ones and the total.

        Args:
            api: As for `conversation`.

        Returns:
            One [`PrefixReuse`][pydantic_ai_append.testing.PrefixReuse] per request.
        """
        return prefix_reuse(self.requests(api))

    def cache_summary(self, api: Api | None = None) -> CacheSummary:
        """The conversation's cache use and cost as the provider reported them, against rewrite mode's cost.

        It is the [`CacheSummary`][pydantic_ai_append.CacheSummary] `AppendInstructions.cache_summary` gives for
        the same conversation's history, read from the wire alone: each reply's `usage` (streamed or not: in
        server-sent events, or in the `metadata` event of AWS's event stream for Bedrock's ConverseStream) as
        Pydantic AI maps it, priced by `genai-prices` through `ModelResponse.cost()`, with or without the
        capability on the agent. A request is expected to read the previous one, in the provider's count (on OpenAI
        rounded down to its 1,024-and-128 steps), where it starts with all of that request's segments byte for byte
        and the same model answered, on a model that caches only at breakpoints (Anthropic's, Claude and Nova on
        Bedrock, as Pydantic AI's profile of the model says) or once the conversation shows cache use; one that
        moved the prefix is expected to read nothing (where the capability would report an `unexpected` shortfall,
        `assert_prefix_stable` shows what moved). Where the segments it adds deliver a change to a block (a replacing
        `<context id="X">` or `<context-diff id="X">` element, or a withdrawal), rewrite mode would have moved the
        prefix at the block's `<context id="X">` opening in the instructions, so its read is capped at the bytes of
        the segments before that opening, at 4 bytes a token, leaving out the announcement of `<system>` blocks
        that Pydantic AI 2.68 sends a model without inline system messages because the capability asks for it, as
        rewrite mode sends no change to need it (it is counted where the model's profile announces unasked). The
        capability estimates the same from the instructions it renders; this one counts what was sent, with the JSON
        around each segment, so where a change was delivered the two savings differ a little (on the fake provider,
        each read is within 20 tokens of what an `on_change='rewrite'` run reads). Tokens and cost are the same. What never
        reopening a window would have cost is priced as sent: the changes a window opened by price dropped are in the
        capability's records only.

        An exchange whose reply holds no JSON (an empty or cut body, an HTML error page) or is an error object
        (Bedrock's bare `message`) is left out, as Pydantic AI made no response of it; a reply without usage counts
        as a request of no tokens.

        Args:
            api: As for `conversation`.

        Returns:
            The totals of the conversation's requests to that API.
        """
        name = self._api(api)
        return wire_summary(
            name,
            [
                exchange
                for exchange in self.exchanges
                if api_of(exchange.method, exchange.path, exchange.user_agent) == name
            ],
        )

    def close(self) -> None:
        """Close every client `http_client` made that is still open; the fixture calls it at teardown.

        Raises:
            UserError: If called while an event loop is running, where `await aclose()` is the way to close them.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self.aclose())
            return
        raise UserError(
            'PromptWire.close() runs an event loop of its own; inside one, use `await prompt_wire.aclose()`'
        )

    async def aclose(self) -> None:
        """Close every client `http_client` made that is still open."""
        for client in self._clients:
            if not client.is_closed:
                await client.aclose()

    def _reads_discounted(self, api: Api) -> bool:
        """Whether the cache reads of the model the conversation's first request names cost less than uncached input."""
        models = (
            model_of(exchange.path, parse_body(api, exchange.request_body))
            for exchange in self.exchanges
            if api_of(exchange.method, exchange.path, exchange.user_agent) == api
        )
        return reads_discounted(PROVIDERS[api], next((model for model in models if model), None))

    def _api(self, api: Api | None) -> Api:
        if api is not None:
            if api not in API_PATHS:
                raise UserError(f'unknown API {api!r}: name one of {sorted(API_PATHS)}')
            return api
        seen: list[Api] = []
        for exchange in self.exchanges:
            name = api_of(exchange.method, exchange.path, exchange.user_agent)
            if name is not None and name not in seen:
                seen.append(name)
        seen.sort()
        if len(seen) == 1:
            return seen[0]
        if not seen:
            paths = [exchange.path for exchange in self.exchanges]
            raise UserError(
                f'no request to a provider API was recorded (paths seen: {paths}); give the provider a client from '
                f'`http_client()` or a transport from `transport()`, or name the API'
            )
        raise UserError(f'requests went to several APIs, {seen}; name the one to check, e.g. api={seen[0]!r}')
