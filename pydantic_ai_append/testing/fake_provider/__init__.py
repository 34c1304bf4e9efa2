"""A scripted LLM provider on loopback, so tests drive the real `openai`, `anthropic`, `google-genai` and `boto3`
SDKs offline, and see what each request would have cost.

Wire claims only hold for the bytes that Pydantic AI's real model classes and the provider SDKs put on the wire, so
tests can't swap in `FunctionModel` for them. This module serves the provider APIs those classes speak (OpenAI Chat
Completions, OpenAI Responses, Anthropic Messages and Google Gemini's `generateContent`, each as JSON and as
server-sent events, and AWS Bedrock's Converse, as JSON and as ConverseStream's binary event stream) from a real HTTP
server on `127.0.0.1`, answering with turns the test scripts, and keeps every request body it receives. Usage follows
each provider's documented prompt cache (`caching`; Gemini's implicit caching included, reported in
`cachedContentTokenCount`), and each exchange reads it as Pydantic AI does and prices it with `genai-prices`
(`ServerExchange.usage`, `ServerExchange.cost_usd`). The model helpers build Pydantic AI models pointed at it; each
needs only its own API's SDK (`pydantic-ai-slim[openai]`, `[anthropic]`, `[google]` or `[bedrock]`).

It also compacts the way the two native compaction APIs do, so Pydantic AI's `AnthropicCompaction` and
`OpenAICompaction` can be run against it: a request over its compaction trigger gets a reply that opens with a
compaction block or item before the scripted turn, and `POST /v1/responses/compact` answers with a compaction item.

The modules behind it: `_script` (the turns a test scripts), `_server` (the HTTP server and its routing), `caching`
(the prompt cache its usage follows, with Gemini's rules in `_gemini_cache` and what every provider's rules share in
`_cache_store`), `_compaction` (when and to what it compacts), one module per API (`_openai_chat`,
`_openai_responses`, `_anthropic_messages`, `_gemini`, `_bedrock_converse` with `_event_stream` for AWS's framing)
with `_replies` for what their replies share, and `_models` (the model helpers).
"""

from ._models import anthropic_model, bedrock_model, google_model, openai_chat_model, openai_responses_model
from ._script import FakeRequest, Script, ServedApi, Text, ToolCalls, Turn
from ._server import FakeProvider, ServerExchange

__all__ = [
    'FakeProvider',
    'FakeRequest',
    'Script',
    'ServedApi',
    'ServerExchange',
    'Text',
    'ToolCalls',
    'Turn',
    'anthropic_model',
    'bedrock_model',
    'google_model',
    'openai_chat_model',
    'openai_responses_model',
]
