"""Request fields outside the cache-order segments that a provider documents as moving its cache, and how far.

A provider's cache is not only the bytes of tools, system and conversation: some request settings are part of it too,
and a change of one invalidates the cache from a documented point on even though every segment is sent again byte for
byte. The cassette checker compares them between two requests of a conversation, so that such a change is reported,
and the bytes after that point are not counted as reused.

- Anthropic, "What invalidates the cache" in https://platform.claude.com/docs/en/build-with-claude/prompt-caching:
  changing `tool_choice` or the extended-thinking parameters (`thinking`) invalidates the cached messages, the tools
  and system prompt staying cached; switching `speed` invalidates the cached system prompt and messages, the tools
  staying cached. The table's other rows are content the segments hold already (tool definitions, images) or toggles
  this module does not model (web search, citations): those changes are reported where their content changed, which
  is never later than the provider's point.
- OpenAI, "What can be cached" in https://developers.openai.com/api/docs/guides/prompt-caching: the structured-output
  schema is cached as a prefix of the system message. So a change of `response_format` (Chat Completions) or
  `text.format` (Responses) invalidates everything from the first message, or the instructions, on; the tools stay
  cached.
- Mistral, Groq and Hugging Face (the pages `segments` cites) name no request setting beside the prompt as part of
  their cache, and Cohere documents no cache, so none is compared for them. Nor is any for Gemini: its implicit cache
  (https://ai.google.dev/gemini-api/docs/caching) is documented as a prefix of the system instruction, tools and
  contents only. Nor for Bedrock: https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html caches
  the tools, system and messages up to each cache checkpoint and names no request field beside them; Anthropic's own
  rules for `tool_choice` and thinking are documented for its API, not for Claude on Bedrock or for Nova.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast

from .segments import Api, Segment, canonical, excerpt, first_difference


class Setting(NamedTuple):
    """A request field the provider documents as part of its cache, with where a change of it invalidates the cache."""

    field: str
    """The field, with `.` between the keys of a nested one (`text.format`)."""

    invalidates: frozenset[str]
    """The segment kinds it invalidates: the cache is invalidated from the first segment of one of them on."""

    rule: str
    """What the provider's documentation says of a change, to end a report with."""


SETTINGS: Mapping[Api, tuple[Setting, ...]] = {
    'anthropic': (
        Setting('speed', frozenset({'system', 'message'}), 'Anthropic invalidates the cached system and messages'),
        Setting('tool_choice', frozenset({'message'}), 'Anthropic invalidates the cached messages'),
        Setting('thinking', frozenset({'message'}), 'Anthropic invalidates the cached messages'),
    ),
    'openai-chat': (
        Setting(
            'response_format',
            frozenset({'message'}),
            'OpenAI caches the structured-output schema before the system message, so the messages are not reused',
        ),
    ),
    'openai-responses': (
        Setting(
            'text.format',
            frozenset({'instructions', 'input', 'output'}),
            'OpenAI caches the structured-output schema before the system message, so the instructions and input are '
            'not reused',
        ),
    ),
    'mistral-chat': (),
    'groq-chat': (),
    'huggingface-chat': (),
    'cohere-chat': (),
    'gemini': (),
    'bedrock-converse': (),
}
"""Each API's settings, in the order a report names them."""


class SettingChange(NamedTuple):
    """A setting that differs between two requests of a conversation."""

    setting: Setting
    """The setting."""

    segment: int
    """The first segment of the earlier request the change invalidates (its length if it invalidates none)."""

    before: bytes | None
    """Its value in the earlier request as canonical JSON, or `None` if that request doesn't send it."""

    after: bytes | None
    """Its value in the later request, the same way."""

    def message(self, index: int, earlier: Sequence[Segment]) -> str:
        """Say how request `index` moves the cache of request `index - 1` (segments `earlier`)."""
        before, after = self.before or b'', self.after or b''
        offset = first_difference(before, after)
        return (
            f'request {index} does not reuse the cache of request {index - 1} from segment {self.segment} '
            f'({earlier[self.segment].kind}) on: `{self.setting.field}` changed from {_shown(self.before, offset)} to '
            f'{_shown(self.after, offset)}: {self.setting.rule} when it changes'
        )


def _shown(value: bytes | None, offset: int) -> str:
    # A long value (a schema) is shown around its first difference, which is what a reader needs to find.
    return '(not sent)' if value is None else excerpt(value, offset)


def _value(request: Mapping[str, Any], field: str) -> bytes | None:
    value: object = request
    for key in field.split('.'):
        if not isinstance(value, dict):
            return None
        value = cast('dict[str, object]', value).get(key)
    return None if value is None else canonical(value)


def setting_change(
    api: Api, earlier_request: Mapping[str, Any], later_request: Mapping[str, Any], earlier: Sequence[Segment]
) -> SettingChange | None:
    """The setting change between two requests that invalidates the cache from the earliest point, if any.

    Args:
        api: The provider API both requests went to.
        earlier_request: The earlier request body, parsed.
        later_request: The later request body, parsed.
        earlier: The earlier request's full segments, to find where a change invalidates the cache.

    Returns:
        The change whose point comes first (the first named on a tie), or `None` if every setting is the same in both
        requests, key order included.
    """
    changes: list[SettingChange] = []
    for setting in SETTINGS[api]:
        before, after = _value(earlier_request, setting.field), _value(later_request, setting.field)
        if before != after:
            kinds = setting.invalidates
            point = next((i for i, segment in enumerate(earlier) if segment.kind in kinds), len(earlier))
            changes.append(SettingChange(setting, point, before, after))
    return min(changes, key=lambda change: change.segment, default=None)
