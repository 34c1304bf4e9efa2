"""The error a `WireVerifier` refuses a request with: one the provider SDK sending it lets through as it is.

The OpenAI, Mistral, Hugging Face and Cohere SDKs let an error from their HTTP client through as it is. The Anthropic
SDK wraps any error but its own (`AnthropicError`) in `APIConnectionError` and retries it, so a refusal of a request to
the Anthropic API is also an `AnthropicError`: the SDK passes it through, after one attempt. The Groq SDK wraps and retries
every error, its own too, so there the refusal reaches the caller as the cause of the SDK's `APIConnectionError`
(which Pydantic AI raises as `ModelConnectionError`), each retry refused again without being counted again.
"""

from __future__ import annotations

import functools
import importlib

from .._wire.segments import Api
from ._errors import WirePrefixDivergenceError

_SDK_ERRORS: dict[Api, tuple[str, str]] = {'anthropic': ('anthropic', 'AnthropicError')}
"""The base error of each SDK that wraps any other error from its HTTP client in `APIConnectionError` and retries it,
but lets its own through: the module and the class."""


def refusal_type(api: Api) -> type[WirePrefixDivergenceError]:
    """The error to refuse a request with: one the SDK sending it lets through as it is."""
    sdk = _SDK_ERRORS.get(api)
    if sdk is None:
        return WirePrefixDivergenceError
    module, name = sdk
    try:
        sdk_error: type[Exception] = getattr(importlib.import_module(module), name)
    except ImportError:
        # No such SDK, so nothing to wrap the error: the request came from another client.
        return WirePrefixDivergenceError
    return _sdk_refusal_type(sdk_error)


@functools.cache
def _sdk_refusal_type(sdk_error: type[Exception]) -> type[WirePrefixDivergenceError]:
    # Being an error of the SDK's own, the refusal reaches the caller as itself, after a single attempt.
    name = sdk_error.__name__.removesuffix('Error') + 'WirePrefixDivergenceError'
    doc = f'A `WirePrefixDivergenceError` that the SDK whose base error is `{sdk_error.__qualname__}` lets through.'
    return type(name, (WirePrefixDivergenceError, sdk_error), {'__doc__': doc, '__module__': __name__})
