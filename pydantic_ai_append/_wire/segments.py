"""A provider request body as the provider caches it: a list of cache-order segments, compared byte for byte.

Providers cache a prompt by its prefix, in cache order: tools, then system instructions, then the conversation.
Raw JSON bodies are never byte prefixes of each other (arrays close before later keys), so a body is split into
its cache-order segments (Anthropic: each tool but deferred ones, each `system` block, each message; OpenAI Chat,
the Chat Completions of Mistral, Groq and Hugging Face, and Cohere's Chat: each tool, each message; OpenAI
Responses: each tool, `instructions`, each `input` item; Gemini: each part of `systemInstruction`, each tool, each
content), each re-encoded canonically with the key order as sent.
The test-time checks in `testing`, the cassette checker and the runtime verifier in `guard` compare requests this
way, and report a divergence the same way, so the split lives here once.

Mistral, Groq and Hugging Face take OpenAI's Chat Completions body, and cache the prompt it renders by its prefix:
the tools, then the messages, as OpenAI's do.

- Mistral, https://docs.mistral.ai/studio-api/conversations/advanced/prompt-caching: requests that share the prompt's
  first part reuse its cached tokens, more likely with the same `prompt_cache_key` (Pydantic AI's
  `mistral_prompt_cache_key`); the reply reports them in `usage.prompt_tokens_details.cached_tokens`.
- Groq, https://console.groq.com/docs/prompt-caching: automatic prefix matching over system prompts, tool definitions
  and the conversation, kept for two hours without use; reported in `usage.prompt_tokens_details.cached_tokens`.
- Hugging Face's router documents no cache of its own: the inference provider it picks caches, or not, by its own
  rules. The split is OpenAI Chat's, so the prefix a provider could cache is checked all the same.
- Cohere's v2 Chat (`POST /v2/chat`) has a body of the same shape, `tools` and `messages` with the system prompt as
  the first message; Cohere documents no prompt cache, and its usage reports `cached_tokens` beside `tokens`. The
  split is the same.

Each is named as itself, by what its SDK sends: Groq's posts to `/openai/v1/chat/completions`; Mistral's
(`mistral-client-python/…`) and Hugging Face's (`…; hf_hub/…`) post to OpenAI's path and name themselves in the
`User-Agent` header. The OpenAI SDK's providers (OpenRouter, DeepSeek, Cerebras, Ollama, Together, ...) are read as
OpenAI Chat, which their bodies are.

Google Gemini's `generateContent` (`POST .../models/{model}:generateContent`, or `:streamGenerateContent` when
streamed) is read as `gemini`. Per https://ai.google.dev/gemini-api/docs/caching its implicit cache reads the longest
prefix an earlier request to the same model sent, in the order system instruction, tools, contents, so the segments
are each part of `systemInstruction`, each entry of `tools`, each entry of `contents`; usage reports the read in
`usageMetadata.cachedContentTokenCount`. The model is named in the path, not the body.

AWS Bedrock's Converse (`POST /model/{modelId}/converse`, or `/converse-stream` when streamed) is read as
`bedrock-converse`. Per https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html a prompt is cached
up to a cache checkpoint, in the order tools, system, messages, so the segments are each tool of
`toolConfig.tools`, each `system` block, each message. A checkpoint is a `{"cachePoint": ...}` block of its own in any
of those lists; Pydantic AI moves it to the newest message at each request, so, like Anthropic's `cache_control`,
it is dropped. botocore sends the body; `botocore_hooks` reads it. The model is named in the path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple, TypeAlias, cast
from urllib.parse import unquote

Api: TypeAlias = Literal[
    'anthropic',
    'openai-chat',
    'openai-responses',
    'mistral-chat',
    'groq-chat',
    'huggingface-chat',
    'cohere-chat',
    'gemini',
    'bedrock-converse',
]
"""A provider API whose request bodies can be split: Anthropic Messages, OpenAI Chat Completions or Responses, the
Chat Completions of Mistral, Groq or Hugging Face, Cohere's v2 Chat, Google Gemini's `generateContent`, or AWS
Bedrock's Converse."""

API_PATHS: Mapping[Api, str] = {
    'anthropic': '/v1/messages',
    # Before OpenAI's, which its path ends in.
    'groq-chat': '/openai/v1/chat/completions',
    'openai-chat': '/v1/chat/completions',
    'openai-responses': '/v1/responses',
    'mistral-chat': '/v1/chat/completions',
    'huggingface-chat': '/v1/chat/completions',
    'cohere-chat': '/v2/chat',
    'gemini': ':generateContent',
    'bedrock-converse': '/converse',
}
"""The request path of each API (the end of the URL path): Mistral and Hugging Face post to OpenAI Chat's."""

_STREAMED: Mapping[str, Api] = {':streamGenerateContent': 'gemini', '/converse-stream': 'bedrock-converse'}
"""The end of the path of Gemini's streamed `generateContent` and of Bedrock's ConverseStream."""

_PATH_MODEL = re.compile(
    r'/models/(?P<gemini>[^/:]+):(?:generateContent|streamGenerateContent)$|/model/(?P<bedrock>[^/]+)/converse(?:-stream)?$'
)
"""Where Gemini (`.../models/{model}:generateContent`) and Bedrock (`/model/{modelId}/converse`) name the model."""

_CHAT_COMPLETIONS = '/chat/completions'
"""The end of the path of every OpenAI-compatible Chat Completions endpoint, with or without `/v1` before it."""

_CHAT_SDKS: Mapping[str, Api] = {'mistral-client-': 'mistral-chat', 'hf_hub/': 'huggingface-chat'}
"""What the SDKs that post to OpenAI Chat's path for another API put in their `User-Agent` header."""


def api_of(method: str, path: str, user_agent: str | None = None) -> Api | None:
    """The API a request is to, for a `POST` whose URL path ends in one of `API_PATHS` (or in `/chat/completions`,
    OpenAI Chat's without its `/v1`, or in Gemini's `:streamGenerateContent` or Bedrock's `/converse-stream`), else
    `None`.

    The verifier, the capture and the checker pick the requests they read by this; a `GET` to the same path (OpenAI
    lists stored chat completions so) is not a request to the model.

    Args:
        method: The request's HTTP method.
        path: Its URL path.
        user_agent: Its `User-Agent` header, which tells Mistral's and Hugging Face's SDKs from OpenAI's.
    """
    if method != 'POST':
        return None
    api: Api | None = next((name for name, api_path in API_PATHS.items() if path.endswith(api_path)), None)
    if api is None and path.endswith(_CHAT_COMPLETIONS):
        # An OpenAI-compatible provider whose base URL has no `/v1`, as DeepSeek's (`https://api.deepseek.com`).
        api = 'openai-chat'
    if api is None:
        api = next((name for end, name in _STREAMED.items() if path.endswith(end)), None)
    if api == 'openai-chat' and user_agent is not None:
        for mark, sdk_api in _CHAT_SDKS.items():
            if mark in user_agent:
                return sdk_api
    return api


CACHE_MARKER_KEYS: Mapping[Api, frozenset[str]] = {
    'anthropic': frozenset({'cache_control'}),
    'openai-chat': frozenset({'prompt_cache_breakpoint'}),
    'openai-responses': frozenset({'prompt_cache_breakpoint'}),
    'mistral-chat': frozenset(),
    'groq-chat': frozenset(),
    'huggingface-chat': frozenset(),
    'cohere-chat': frozenset(),
    'gemini': frozenset(),
    'bedrock-converse': frozenset({'cachePoint'}),
}
"""Keys that mark cache breakpoints rather than carry content; they move every request, so they're dropped, and a
list's element made of nothing else (Bedrock's `{"cachePoint": ...}` block) with them."""


def model_of(path: str, request: Mapping[str, object]) -> str:
    """The model a request is to: the body's `model`, else the one its path names (Gemini's, Bedrock's), else `''`."""
    model = request.get('model')
    if isinstance(model, str):
        return model
    match = _PATH_MODEL.search(path)
    return unquote(match['gemini'] or match['bedrock']) if match is not None else ''


class Segment(NamedTuple):
    """One cache-order piece of a request body."""

    kind: str
    """What the piece is: `tool`, `system`, `message` (Anthropic, Chat), `instructions`, `input` or `output`
    (Responses, where `output` is a previous response's output item that `previous_response_id` or `conversation`
    brings in)."""

    data: bytes
    """The piece as canonical JSON: as sent, key order kept, cache markers dropped, no whitespace."""


def canonical(value: object) -> bytes:
    """`value` as canonical JSON: key order kept, no whitespace, non-ASCII text as it is."""
    return json.dumps(value, sort_keys=False, separators=(',', ':'), ensure_ascii=False).encode()


def _without_keys(value: object, keys: frozenset[str]) -> object:
    if isinstance(value, dict):
        items = cast('dict[str, object]', value).items()
        return {key: _without_keys(item, keys) for key, item in items if key not in keys}
    if isinstance(value, list):
        return [_without_keys(item, keys) for item in cast('list[object]', value) if not _only_keys(item, keys)]
    return value


def _only_keys(value: object, keys: frozenset[str]) -> bool:
    if not isinstance(value, dict):
        return False
    names = cast('dict[str, object]', value).keys()
    return bool(names) and keys.issuperset(names)


def pieces(kind: str, value: object, keys: frozenset[str]) -> list[Segment]:
    # A list is one segment per element; a bare value (a string system prompt or input) is one segment.
    if value is None:
        return []
    values = cast('list[object]', value) if isinstance(value, list) else [value]
    return [Segment(kind, canonical(_without_keys(item, keys))) for item in values if not _only_keys(item, keys)]


def parse_body(api: Api, body: bytes) -> dict[str, Any]:
    parsed: object = json.loads(body)
    if not isinstance(parsed, dict):
        raise TypeError(f'{api} request body is not a JSON object: {body[:200]!r}')
    return cast('dict[str, Any]', parsed)


def cached_tools(api: Api, tools: object) -> object:
    """The tools of a request that are part of the cached prefix: for Anthropic, those not marked `defer_loading`.

    Anthropic leaves deferred tools out of the cached prefix: when tool search finds one, its definition goes into the
    conversation as a `tool_reference` block, so adding deferred tools, or sending them in another order, keeps the
    cache ("defer_loading and cache preservation" in
    https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-use-with-prompt-caching).
    """
    if api != 'anthropic' or not isinstance(tools, list):
        return tools
    return [tool for tool in cast('list[object]', tools) if not _deferred(tool)]


def _deferred(tool: object) -> bool:
    return isinstance(tool, dict) and cast('dict[str, object]', tool).get('defer_loading') is True


def segments(api: Api, body: bytes) -> list[Segment]:
    """Split one request body into its cache-order segments.

    Anthropic: each tool but those marked `defer_loading` (see `cached_tools`), each `system` block, each message.
    OpenAI Chat, Mistral, Groq, Hugging Face and Cohere: each tool, each message. OpenAI Responses: each tool,
    `instructions`, each `input` item, taking the body as it is; use `WireConversation` to bring in what
    `previous_response_id` or `conversation` refers to. Gemini: each part of `systemInstruction`, each tool, each
    content. Bedrock Converse: each tool of `toolConfig.tools`, each `system` block, each message. Keys in
    `CACHE_MARKER_KEYS` are dropped at any depth, and a list's element made only of them.

    Args:
        api: Which provider API the body was sent to.
        body: The raw request body.

    Returns:
        The segments in cache order.

    Raises:
        ValueError: If the body is not JSON.
        TypeError: If the body is JSON but not an object.
    """
    request = parse_body(api, body)
    keys = CACHE_MARKER_KEYS[api]
    tools = pieces('tool', cached_tools(api, request.get('tools')), keys)
    if api == 'anthropic':
        return tools + pieces('system', request.get('system'), keys) + pieces('message', request.get('messages'), keys)
    if api == 'openai-responses':
        return (
            tools
            + pieces('instructions', request.get('instructions'), keys)
            + pieces('input', request.get('input'), keys)
        )
    if api == 'gemini':
        system: object = request.get('systemInstruction')
        parts = cast('dict[str, object]', system).get('parts') if isinstance(system, dict) else system
        return pieces('system', parts, keys) + tools + pieces('message', request.get('contents'), keys)
    if api == 'bedrock-converse':
        config: object = request.get('toolConfig')
        tools = pieces(
            'tool', cast('dict[str, object]', config).get('tools') if isinstance(config, dict) else None, keys
        )
        return tools + pieces('system', request.get('system'), keys) + pieces('message', request.get('messages'), keys)
    return tools + pieces('message', request.get('messages'), keys)


def common_prefix_length(earlier: Sequence[Segment], later: Sequence[Segment]) -> int:
    """How many segments, from the start, `later` repeats of `earlier` byte for byte."""
    count = 0
    for before, after in zip(earlier, later, strict=False):
        if before != after:
            break
        count += 1
    return count


def first_difference(before: bytes, after: bytes) -> int:
    """Where `after` first differs from `before`: a byte offset, or the shorter length if one extends the other."""
    pairs = enumerate(zip(before, after, strict=False))
    return next((offset for offset, (x, y) in pairs if x != y), min(len(before), len(after)))


EXCERPT_WIDTH = 120
"""The most bytes of a value an excerpt shows."""

EXCERPT_LEAD = 40
"""How many of those come before the byte the excerpt is taken around, where the value has them."""


def excerpt(data: bytes, offset: int, *, width: int = EXCERPT_WIDTH, lead: int = EXCERPT_LEAD) -> str:
    """`data` around `offset` (where it first differs from another value), with `…` where it was cut.

    The excerpt is `width` bytes from `lead` bytes before `offset`, moved back from the end of `data` as far as it
    needs to stay `width` bytes long, so a value of `width` bytes or fewer is shown whole.
    """
    start = max(0, min(offset - lead, len(data) - width))
    text = data[start : start + width].decode(errors='replace')
    return ('…' if start else '') + text + ('…' if start + width < len(data) else '')


def parting(earlier: Sequence[Segment], later: Sequence[Segment], position: int) -> tuple[int, str, str | None]:
    """Where two requests part in segment `position`: its first differing byte, and an excerpt of each side there.

    Args:
        earlier: The previous request's segments.
        later: The request's segments.
        position: The first segment of `earlier` that `later` does not repeat, as `common_prefix_length` finds it.

    Returns:
        The offset of the first differing byte (0 if `later` ends before the segment), the excerpt of `earlier`'s
        segment around it, and of `later`'s, or `None` if `later` ends before it.
    """
    before = earlier[position]
    if position >= len(later):
        return 0, excerpt(before.data, 0), None
    after = later[position]
    offset = first_difference(before.data, after.data)
    return offset, excerpt(before.data, offset), excerpt(after.data, offset)


def describe_divergence(
    subject: str, index: int, position: int, kind: str, sides: tuple[str, str | None], *, differs: str
) -> str:
    """Say how request `index` breaks the prefix of request `index - 1`, with both sides, in a few lines.

    The checker, `assert_prefix_stable` and the verifier's `WireDivergence` all say it this way.

    Args:
        subject: How the message names request `index`, such as `request 2`.
        index: The request's position in its conversation.
        position: The first segment of request `index - 1` that request `index` does not repeat.
        kind: That segment's kind in request `index - 1`.
        sides: The excerpts of the segment in request `index - 1` and in request `index`, as `parting` makes them;
            the second is `None` if request `index` ends before it.
        differs: What differs in the segment, said when request `index` has it.
    """
    head = f'{subject} does not extend request {index - 1} byte for byte: '
    previous, current = sides
    if current is None:
        # A request that ends early has `position` segments: every one of them repeats the previous request's.
        counted = f'{position} segment' if position == 1 else f'{position} segments'
        return (
            f'{head}it ends after {counted}, where request {index - 1} goes on with segment {position} ({kind})\n'
            f'  request {index - 1}: {previous}'
        )
    return f'{head}{differs}\n  request {index - 1}: {previous}\n  request {index}: {current}'


def divergence_message(index: int, earlier: Sequence[Segment], later: Sequence[Segment], position: int) -> str:
    """Say how request `index` (segments `later`) breaks the prefix of request `index - 1` (segments `earlier`).

    Args:
        index: The later request's position in its conversation.
        earlier: The previous request's segments.
        later: The request's segments.
        position: The first segment of `earlier` that `later` does not repeat, as `common_prefix_length` finds it.

    Returns:
        A message naming the first divergent segment's index and kind in both requests and its first differing byte,
        with an excerpt of both sides there, or of what `earlier` goes on with if `later` stops short.
    """
    offset, previous, current = parting(earlier, later, position)
    kind = earlier[position].kind
    differs = ''
    if current is not None:
        differs = (
            f'first divergent segment is {position} ({kind} in request {index - 1}, {later[position].kind} in request '
            f'{index}), at byte {offset} of it'
        )
    return describe_divergence(f'request {index}', index, position, kind, (previous, current), differs=differs)
