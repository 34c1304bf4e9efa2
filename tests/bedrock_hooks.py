"""What the Bedrock wire tests share: a `BedrockConverseModel` on the fake provider whose boto3 client is instrumented,
and a stand-in for a throttled attempt that botocore retries.

Pydantic AI's `BedrockConverseModel` sends through a boto3 client, not an HTTP client, so the wire tools are registered
on the client's own events, as a user does with `BedrockProvider(bedrock_client=verifier.instrument_bedrock(client))`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

from botocore.awsrequest import AWSResponse  # pyright: ignore[reportMissingTypeStubs]
from pydantic_ai.models.bedrock import BedrockConverseModel, BedrockModelSettings
from pydantic_ai.providers.bedrock import BedrockProvider

from pydantic_ai_append.testing.fake_provider import FakeProvider, bedrock_model

SETTINGS = BedrockModelSettings(max_tokens=1_024)
"""With `max_tokens` set, 2.68 sends `agent.run`'s requests to Converse, rather than to ConverseStream behind the
scenes, as 2.58 does without it."""


def instrumented_model(server: FakeProvider, *instruments: Callable[[Any], Any]) -> BedrockConverseModel:
    """The fake provider's Bedrock model, its boto3 client given to each of `instruments` in turn, as a user does."""
    # botocore ships no types: the client is `Any` here, as it is to a user's code.
    model = bedrock_model(server.url)
    client = cast('Any', model.client)  # pyright: ignore[reportUnknownMemberType]
    for instrument in instruments:
        client = instrument(client)
    return BedrockConverseModel(
        model.model_name, provider=BedrockProvider(bedrock_client=client), settings=model.settings
    )


class _Body:
    """The raw body of a reply made here rather than read off a socket: what `AWSResponse.content` reads."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._data


class ThrottleOnce:
    """A botocore `before-send` handler answering the attempt of request `index` with a 503, which botocore retries.

    A `before-send` handler that returns a response is botocore's own way of answering without the network; the
    handlers registered before it (the wire tools') have seen the attempt, as they would one the provider refused.
    """

    BODY = b'{"__type":"ServiceUnavailableException","message":"Try again."}'

    def __init__(self, index: int) -> None:
        self._index = index
        self._attempts = 0

    def __call__(self, request: Any, **kwargs: Any) -> AWSResponse | None:
        self._attempts += 1
        if self._attempts - 1 != self._index:
            return None
        return AWSResponse(request.url, 503, {'content-type': 'application/json'}, _Body(self.BODY))

    def register(self, client: Any) -> Any:
        """Register on `client`'s Converse and ConverseStream requests, and return it."""
        for operation in ('Converse', 'ConverseStream'):
            client.meta.events.register(f'before-send.bedrock-runtime.{operation}', self)
        return client
