"""Tools to check what an agent actually sends: does each request keep the provider's prompt cache?

Providers cache a prompt by its prefix, in cache order: tools, then system instructions, then the
conversation. Structured comparisons can't prove a prefix is stable, since serialization can move bytes
the structured objects hide, and raw JSON bodies are never byte prefixes of each other (arrays close before
later keys). So this module splits each request body into its cache-order segments, re-encoded
canonically but keeping key order as sent, and checks that every request's segments start with the
previous request's, byte for byte.

In a pytest suite, the `prompt_wire` fixture (installed with the package, a `PromptWire`) does it all: give its
`http_client()` to the provider, run the agent, then pin `transcript()` as a snapshot and call
`assert_prefix_stable()`. It is built of the pieces below, which work without pytest too. `WireCapture` records
each request and response body through its HTTP clients or transport wrappers (all of Pydantic AI's `openai` and
`anthropic` model classes take a client), or through a boto3 client of Bedrock it instruments; `WireConversation`
turns them into segments, `transcript` renders them for a snapshot, `assert_prefix_stable` checks them, and
`prefix_reuse` measures the bytes each request reuses. `Api`, `Segment`, `PrefixReuse` and `WireExchange` are the
types they take and return, for a test's annotations. The `fake_provider` submodule is a provider on loopback to run
an agent against offline, with each request's usage and cost as the real provider's cache would make them.
A test has this shape:

```python
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from pydantic_ai_append.testing import PromptWire


def test_my_agent(prompt_wire: PromptWire):
    provider = OpenAIProvider(api_key='your-key', http_client=prompt_wire.http_client())
    model = OpenAIChatModel('gpt-5.2', provider=provider)
    # ... run the agent over several turns ...
    prompt_wire.assert_prefix_stable()
```
"""

from .._wire.conversation import WireConversation
from .._wire.segments import Api, Segment
from ._assertions import PrefixReuse, assert_prefix_stable, prefix_reuse
from ._capture import WireCapture, WireExchange
from ._prompt_wire import PromptWire
from ._transcript import transcript

__all__ = (
    'Api',
    'PrefixReuse',
    'PromptWire',
    'Segment',
    'WireCapture',
    'WireConversation',
    'WireExchange',
    'assert_prefix_stable',
    'prefix_reuse',
    'transcript',
)
