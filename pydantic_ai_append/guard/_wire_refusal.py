"""The error a `WireVerifier` refuses a request with: one the provider SDK sending it lets through as it is.

The OpenAI, Mistral, Hugging Face, Cohere and Google GenAI SDKs let an error from their HTTP client through as it is,
and botocore one from a `before-send` hook (Bedrock's), which it retries only when it is one of its connection errors.
The Anthropic SDK wraps any error but its own (`AnthropicError`) in `APIConnectionError` and retries it, so a refusal
of a request to the Anthropic API is also an `AnthropicError`: the SDK passes it through, after one attempt. The Groq SDK wraps and
retries every error, its own too, so there the refusal reaches the caller as the cause of the SDK's
`APIConnectionError` (which Pydantic AI raises as `ModelConnectionError`), each retry refused again without being
counted again (`WireVerifier`).
"""

from __future__ import annotations

import functools

from .._wire.segments import Api
from ._errors import WirePrefixDivergenceError


def refusal_type(api: Api) -> type[WirePrefixDivergenceError]:
    """The error to refuse a request with: one the SDK sending it lets through as it is."""
    if api != 'anthropic':
        return WirePrefixDivergenceError
    try:
        from anthropic import AnthropicError
    except ImportError:
        # No Anthropic SDK, so nothing to wrap the error: the request came from another client.
        return WirePrefixDivergenceError
    return _anthropic_refusal_type(AnthropicError)


@functools.cache
def _anthropic_refusal_type(sdk_error: type[Exception]) -> type[WirePrefixDivergenceError]:
    # Being an error of the SDK's own, the refusal reaches the caller as itself, after a single attempt.
    class AnthropicWirePrefixDivergenceError(WirePrefixDivergenceError, sdk_error):
        """A `WirePrefixDivergenceError` for a request to the Anthropic API, which the Anthropic SDK lets through."""

    return AnthropicWirePrefixDivergenceError
