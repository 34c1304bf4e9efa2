"""A readable, byte-stable transcript of what each request of a conversation sends, to pin as a snapshot.

A prompt snapshot is reviewed by people in a pull request, so it shows each request in cache order as text (a tool as
its name, description and parameters; a message as `role: text`; a tool call as `name(args)`), marks what is new
since the previous request and where a request breaks the prefix, and leaves out what changes between runs of the
same code: tool-call and item ids become placeholders numbered by first appearance, and long texts can be folded to
their length and hash. Every key a segment carries is shown, as text or compact JSON, so a change to what is sent
shows up in the snapshot.

A segment is read by its shape, the same whichever API sent it. Gemini's contents and Bedrock Converse's messages are
read as the others' messages are, by their role (`user`, `model`; `user`, `assistant`). Their parts and content blocks
carry no `type`: each is named by the one key that holds its content (`text`, Gemini's `functionCall` and
`functionResponse`, Bedrock's `toolUse` and `toolResult`, or another such as `inlineData` or `reasoningContent`, shown
as `key: value`), beside which a Gemini part may carry metadata such as `thoughtSignature`. A Gemini tool entry lists
its `functionDeclarations`, each shown as a tool, and a Bedrock tool is its `toolSpec`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, cast

from pydantic_ai.exceptions import UserError

from .._wire.causes import explain
from .._wire.segments import Segment, canonical, common_prefix_length
from ._assertions import PrefixReuse, prefix_reuse

DEFAULT_FOLD = 2000
"""The length above which `transcript` folds a text to its length and hash, unless told otherwise."""

_CALL_ID_KEYS = ('call_id', 'tool_call_id', 'tool_use_id', 'toolUseId')
_ARGUMENT_KEYS = ('arguments', 'input', 'args')
"""Where a call holds its arguments: OpenAI's, Anthropic's and Bedrock's, Gemini's."""
_CALL_KEYS = ('functionCall', 'toolUse')
"""The content key of a call among Gemini's parts and among Bedrock's content blocks."""
_RESULT_KEYS = ('functionResponse', 'toolResult')
"""The content key of a tool's result among Gemini's parts and among Bedrock's content blocks."""
_TEXT_TYPES = ('text', 'input_text', 'output_text')
_INDENT = '    '


class _Render:
    """What rendering one transcript keeps: the placeholders given so far, and the fold threshold."""

    def __init__(self, fold: int | None, reads_discounted: bool) -> None:
        self.fold = fold
        self.reads_discounted = reads_discounted
        self.calls: dict[str, str] = {}
        self.ids: dict[str, str] = {}

    def call(self, value: object) -> str:
        """The placeholder of a tool-call id, numbered by first appearance."""
        key = str(value)
        return self.calls.setdefault(key, f'call#{len(self.calls) + 1}')

    def other_id(self, value: object) -> str:
        """The placeholder of another id (a response item's), or the call's if the value is a known call id."""
        key = str(value)
        if key in self.calls:
            return self.calls[key]
        return self.ids.setdefault(key, f'id#{len(self.ids) + 1}')

    def folded(self, text: str) -> str:
        if self.fold is None or len(text) <= self.fold:
            return text
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        return f'<{len(text)} chars sha256:{digest}>'

    def stable(self, value: object, key: str | None = None) -> object:
        """`value` with every id in it, at any depth, replaced by its placeholder."""
        if key in _CALL_ID_KEYS:
            return self.call(value)
        if key == 'id':
            return self.other_id(value)
        if isinstance(value, dict):
            return {k: self.stable(v, k) for k, v in cast('dict[str, object]', value).items()}
        if isinstance(value, list):
            return [self.stable(item) for item in cast('list[object]', value)]
        return value

    def value(self, value: object, key: str | None = None) -> str:
        """A value as text: a string as it is, anything else as compact JSON; ids replaced, long ones folded."""
        stable = self.stable(value, key)
        if isinstance(stable, str):
            return self.folded(stable)
        return self.folded(canonical(stable).decode())

    def fields(self, mapping: dict[str, Any]) -> list[str]:
        """One `key: value` line per key left over, so that nothing a segment carries goes unshown."""
        return [f'{_INDENT}{key}: {self.value(value, key)}' for key, value in mapping.items()]

    def call_part(self, item: dict[str, Any]) -> list[str] | None:
        """A tool call as `name(args) [call#N]`, or `None` if not one.

        OpenAI Chat's, OpenAI Responses', Anthropic's, or what a Gemini `functionCall` or a Bedrock `toolUse` holds.
        """
        call = dict(item)
        function = call.get('function')
        if isinstance(function, dict) and call.get('type') == 'function':
            del call['type'], call['function']
            call = {**cast('dict[str, Any]', function), **call}
        name = call.get('name')
        argument_key = next((key for key in _ARGUMENT_KEYS if key in call), None)
        if not isinstance(name, str) or argument_key is None:
            return None
        del call['name']
        arguments = call.pop(argument_key)
        # Responses items carry their own `id` beside the `call_id` that results name; elsewhere `id` is the call's.
        id_key = next((key for key in ('call_id', 'toolUseId', 'id') if key in call), None)
        call_id = call.pop(id_key) if id_key is not None else None
        suffix = f' [{self.call(call_id)}]' if call_id is not None else ''
        call.pop('type', None)
        return [f'{name}({self.value(arguments)}){suffix}', *self.fields(call)]

    def block(self, block: object) -> list[str]:
        """One element of a message's content list."""
        if not isinstance(block, dict):
            return [self.value(block)]
        item = dict(cast('dict[str, Any]', block))
        if 'type' not in item and item:
            return self.keyed_block(item)
        if item.get('type') in _TEXT_TYPES and isinstance(item.get('text'), str):
            del item['type']
            return [self.folded(item.pop('text')), *self.fields(item)]
        if item.get('type') == 'tool_result' and 'tool_use_id' in item:
            del item['type']
            content = self.content(item.pop('content', None))
            return [*self.result(None, item.pop('tool_use_id'), content), *self.fields(item)]
        call = self.call_part(item)
        return call if call is not None else [self.value(item)]

    def keyed_block(self, item: dict[str, Any]) -> list[str]:
        """A Gemini part or a Bedrock content block, named by the key that holds its content rather than by a `type`.

        Text is shown as it is, a call as `name(args) [call#N]`, a result under its call, and any other block as
        `key: value`; the keys beside the content (a Gemini part's `thoughtSignature`) follow as `key: value` lines.
        """
        key = next((key for key in ('text', *_CALL_KEYS, *_RESULT_KEYS) if key in item), None)
        content: object = item.get(key) if key is not None else None
        lines: list[str] | None = None
        if key == 'text' and isinstance(content, str):
            lines = [self.folded(content)]
        elif key in _CALL_KEYS and isinstance(content, dict):
            lines = self.call_part(cast('dict[str, Any]', content))
        elif key in _RESULT_KEYS and isinstance(content, dict):
            lines = self.keyed_result(cast('dict[str, Any]', content))
        if lines is None:
            first, *rest = self.fields(item)
            return [first.removeprefix(_INDENT), *rest]
        del item[cast('str', key)]
        return [*lines, *self.fields(item)]

    def keyed_result(self, value: dict[str, Any]) -> list[str]:
        """What a Gemini `functionResponse` or a Bedrock `toolResult` holds, as the result of its call.

        Gemini's names its tool and holds a `response` object, and the call's `id` if the call had one; Bedrock's
        holds its call's `toolUseId`, `content` blocks and a `status`.
        """
        result = dict(value)
        call_id = result.pop('toolUseId') if 'toolUseId' in result else result.pop('id', None)
        name = result.pop('name') if isinstance(result.get('name'), str) else None
        if 'response' in result:
            content = [self.value(result.pop('response'))]
        else:
            content = self.content(result.pop('content', None))
        return [*self.result(name, call_id, content), *self.fields(result)]

    def result(self, name: str | None, call_id: object, content: list[str]) -> list[str]:
        """A tool's result as `result name [call#N]: content`, where the result names its tool and its call."""
        head = 'result' if name is None else f'result {name}'
        if call_id is not None:
            head = f'{head} [{self.call(call_id)}]'
        return [f'{head}: {content[0]}' if content else head, *content[1:]]

    def content(self, content: object) -> list[str]:
        """A message's or a result's `content`: a string, or a list of blocks, as lines."""
        if content is None:
            return []
        if isinstance(content, list):
            return [line for block in cast('list[object]', content) for line in self.block(block)]
        return [self.value(content)]

    def tool(self, value: object) -> list[str]:
        """A tool definition as `tool name: description`, then its parameters and any other key."""
        if not isinstance(value, dict):
            return [f'tool {self.value(value)}']
        tool = dict(cast('dict[str, Any]', value))
        declarations = tool.get('functionDeclarations')
        if isinstance(declarations, list):
            # A Gemini tool entry declares several functions, and is one segment.
            del tool['functionDeclarations']
            lines = [line for item in cast('list[object]', declarations) for line in self.tool(item)]
            return [*lines, *self.fields(tool)]
        spec = tool.get('toolSpec')
        if isinstance(spec, dict):
            del tool['toolSpec']
            tool = {**cast('dict[str, Any]', spec), **tool}
        function = tool.get('function')
        if tool.get('type') == 'function' and isinstance(function, dict):
            del tool['type'], tool['function']
            tool = {**cast('dict[str, Any]', function), **tool}
        elif tool.get('type') == 'function':
            del tool['type']
        name = tool.get('name')
        if not isinstance(name, str):
            return [f'tool {self.value(cast("object", value))}']
        del tool['name']
        description = tool.pop('description') if isinstance(tool.get('description'), str) else None
        head = f'tool {name}: {self.folded(description)}' if description is not None else f'tool {name}'
        return [head, *self.fields(tool)]

    def item(self, kind: str, value: object) -> list[str]:
        """A message, a system block, the instructions, or an input or output item, as `label: text`."""
        if not isinstance(value, dict):
            return [f'{kind}: {self.value(value)}']
        item = dict(cast('dict[str, Any]', value))
        label = _label(kind, item)
        parts = self.call_part(item)
        if parts is not None:
            return [f'{label}: {parts[0]}', *parts[1:]]
        call_key = next((key for key in _CALL_ID_KEYS if key in item), None)
        if call_key is not None:
            label = f'{label} [{self.call(item.pop(call_key))}]'
        lines = self.content(item.pop('content', None))
        if isinstance(item.get('parts'), list):
            lines.extend(self.content(item.pop('parts')))
        for key in ('text', 'output'):
            if isinstance(item.get(key), str):
                lines.append(self.folded(item.pop(key)))
        lines.extend(self.tool_calls(item.pop('tool_calls', None)))
        head = f'{label}: {lines[0]}' if lines else label
        return [head, *(f'{_INDENT}{line}' for line in lines[1:]), *self.fields(item)]

    def tool_calls(self, tool_calls: object) -> list[str]:
        """An OpenAI Chat message's `tool_calls`, one `name(args) [call#N]` each."""
        lines: list[str] = []
        for tool_call in cast('list[object]', tool_calls) if isinstance(tool_calls, list) else []:
            call = self.call_part(cast('dict[str, Any]', tool_call)) if isinstance(tool_call, dict) else None
            lines.extend(call if call is not None else [self.value(cast('object', tool_call))])
        return lines

    def segment(self, segment: Segment) -> list[str]:
        value: object = json.loads(segment.data)
        lines = self.tool(value) if segment.kind == 'tool' else self.item(segment.kind, value)
        # A text's own line breaks stay line breaks, indented under the line they continue.
        return [piece for line in lines for piece in line.replace('\n', f'\n{_INDENT}').split('\n')]

    def request(self, reuse: PrefixReuse, previous: Sequence[Segment], current: Sequence[Segment]) -> str:
        """One request's block: its head, then each segment, marked as sent before, new, or breaking the prefix."""
        shared = common_prefix_length(previous, current)
        head = f'request {reuse.index}: reuses {reuse.reused_bytes} of {reuse.total_bytes} bytes'
        broken = shared < len(previous)
        if broken and shared < len(current):
            head += f'; breaks the prefix at segment {shared} ({previous[shared].kind} in request {reuse.index - 1})'
        elif broken:
            head += f'; breaks the prefix: ends after {len(current)} of the {len(previous)} segments of request '
            head += f'{reuse.index - 1}'
        lines = [head]
        cause = (
            explain(reuse.index, previous, current, shared, reads_discounted=self.reads_discounted) if broken else None
        )
        if cause is not None:
            lines.extend((f'why: {cause.reason}', f'fix: {cause.fix}'))
        for position, segment in enumerate(current):
            marker = '  ' if position < shared else '! ' if broken and position == shared else '+ '
            lines.extend(f'{marker}{line}' for line in self.segment(segment))
        return '\n'.join(lines) + '\n'


def _label(kind: str, item: dict[str, Any]) -> str:
    """What an item is, taken out of it: its role, else its type (a text block's is left out), else its kind."""
    label = kind
    if isinstance(item.get('role'), str):
        label = item.pop('role')
        if item.get('type') == 'message':
            del item['type']
    elif item.get('type') in _TEXT_TYPES:
        del item['type']
    elif isinstance(item.get('type'), str):
        label = item.pop('type')
    if kind == 'output':
        # Brought in from a previous response by `previous_response_id`, rather than sent in this request.
        label = f'{label} (output)'
    return label


def transcript(
    requests: Sequence[Sequence[Segment]], *, fold: int | None = DEFAULT_FOLD, reads_discounted: bool = True
) -> str:
    """Render each request of a conversation in cache order, as text to pin with `inline_snapshot.snapshot()`.

    Each request is headed with its index and the bytes of it the previous request already sent. Its segments follow
    in cache order: one the previous request sent too starts with two spaces, a new one with `+ `, and the first of a
    request that breaks the prefix with `! `; where the requests tell why the prefix moved, `why:` and `fix:` lines
    follow the head, as `assert_prefix_stable` says them. Ids become `call#1`, `id#1`, ... by first appearance, so the
    text is the same on every run. A key of a segment with no readable form is shown as `key: value`.

    ```python
    import json

    from pydantic_ai_append.testing import WireConversation, transcript

    system = {'role': 'system', 'content': 'Be brief.'}
    user = {'role': 'user', 'content': 'Time?'}
    call = {'id': 'call_Xy7', 'type': 'function', 'function': {'name': 'get_time', 'arguments': '{}'}}
    asked = {'role': 'assistant', 'content': None, 'tool_calls': [call]}
    answered = {'role': 'tool', 'tool_call_id': 'call_Xy7', 'content': '12:00'}
    conversation = WireConversation('openai-chat')
    conversation.add(json.dumps({'messages': [system, user]}).encode())
    conversation.add(json.dumps({'messages': [system, user, asked, answered]}).encode())
    conversation.add(json.dumps({'messages': [{'role': 'system', 'content': 'Be very brief.'}, user]}).encode())
    print(transcript(conversation.requests), end='')
    #> request 0: reuses 0 of 72 bytes
    #> + system: Be brief.
    #> + user: Time?
    #>
    #> request 1: reuses 72 of 265 bytes
    #>   system: Be brief.
    #>   user: Time?
    #> + assistant: get_time({}) [call#1]
    #> + tool [call#1]: 12:00
    #>
    #> request 2: reuses 0 of 77 bytes; breaks the prefix at segment 0 (message in request 1)
    #> why: the instructions changed and state no block of this plugin: 'Be brief.' became 'Be very brief.'
    #> fix: register the part that changes as a block of `AppendInstructions` and make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static (a clock belongs in an append-mode block or in the user turn)
    #> ! system: Be very brief.
    #> + user: Time?
    ```

    Args:
        requests: Each request's segments in order, e.g. `WireConversation.requests`.
        fold: Texts longer than this many characters are shown as `<N chars sha256:xxxxxxxx>` (the start of the
            SHA-256 of their UTF-8 bytes); `None` shows every text whole.
        reads_discounted: As for `assert_prefix_stable`.

    Returns:
        The transcript, ending with a newline.

    Raises:
        UserError: If `fold` is less than 1.
    """
    if fold is not None and fold < 1:
        raise UserError(f'transcript fold must be at least 1 character, or None to fold nothing, not {fold!r}')
    render = _Render(fold, reads_discounted)
    pairs = zip(prefix_reuse(requests), [(), *requests], requests, strict=False)  # each request after the one before
    return '\n'.join(render.request(reuse, previous, current) for reuse, previous, current in pairs)
