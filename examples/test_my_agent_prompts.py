"""A test of what an agent sends, to copy into your own suite: a transcript snapshot and the prefix check.

The `prompt_wire` fixture comes with the package (no `conftest.py` needed). The agent keeps a todo list in an
`AppendInstructions` block, and the test runs three turns, the list changing between them. Two checks pin its
prompts:

- the transcript of every request, in cache order, as an inline snapshot you review in pull requests: `+` marks
  what each request added, `!` where one broke the cached prefix;
- `assert_prefix_stable()`, which fails when a request stops extending the previous one byte for byte, the way a
  provider's prompt cache needs.

It runs offline: the package's fake provider (`pydantic_ai_append.testing.fake_provider`) stands in for the OpenAI
API on loopback, so the bytes checked are the ones the real OpenAI SDK sends, with no key or network, and the SDK of
that one API is all it needs. To test against the provider, build the model with `OpenAIProvider(api_key=...,
http_client=prompt_wire.http_client())` instead and record a cassette with pytest-recording (`@pytest.mark.vcr`); the
fixture then checks what each replay sends. Create or update the snapshot with `pytest --inline-snapshot=fix` once
the new transcript is the one you want.

    uv run pytest examples/test_my_agent_prompts.py
"""

from __future__ import annotations

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.models import Model

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import PromptWire
from pydantic_ai_append.testing.fake_provider import FakeProvider, FakeRequest, Text, openai_chat_model

todos = AppendInstructions[list[str]](id='todos')


@todos.instructions(name='list', on_change='append')
def todo_list(ctx: RunContext[list[str]]) -> str:
    return '\n'.join(f'- {item}' for item in ctx.deps)


def make_agent(model: Model) -> Agent[list[str], str]:
    return Agent(model, deps_type=list[str], instructions='Help with the todo list. Be brief.', capabilities=[todos])


def reply(request: FakeRequest) -> Text:
    """Answer every request with one short reply."""
    return Text(f'Noted ({len(request.json["messages"])} messages so far).')


@pytest.mark.anyio
async def test_my_agent_keeps_its_prompt_cache(prompt_wire: PromptWire):
    with FakeProvider(script=reply) as server:
        agent = make_agent(openai_chat_model(server.url, http_client=prompt_wire.http_client()))
        items = ['write tests']
        history = (await agent.run('What is first?', deps=items)).all_messages()
        items.append('write docs')
        history = (await agent.run('I added one.', deps=items, message_history=history)).all_messages()
        items.remove('write tests')
        await agent.run('Tests are done.', deps=items, message_history=history)

    prompt_wire.assert_prefix_stable()
    # Every request after the first reuses all of the one before it: a provider can serve that much from cache.
    reuse = prompt_wire.prefix_reuse()
    assert [row.reused_bytes for row in reuse[1:]] == [row.total_bytes for row in reuse[:-1]]
    assert prompt_wire.transcript() == snapshot("""\
request 0: reuses 0 of 346 bytes
+ system: Help with the todo list. Be brief.
+ system: <context id="capability:todos:list">
+     - write tests
+     </context>
+ system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
+ user: What is first?

request 1: reuses 346 of 554 bytes
  system: Help with the todo list. Be brief.
  system: <context id="capability:todos:list">
      - write tests
      </context>
  system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
  user: What is first?
+ assistant: Noted (4 messages so far).
+ user: I added one.
+ system: <context id="capability:todos:list">
+     - write tests
+     - write docs
+     </context>

request 2: reuses 554 of 750 bytes
  system: Help with the todo list. Be brief.
  system: <context id="capability:todos:list">
      - write tests
      </context>
  system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
  user: What is first?
  assistant: Noted (4 messages so far).
  user: I added one.
  system: <context id="capability:todos:list">
      - write tests
      - write docs
      </context>
+ assistant: Noted (7 messages so far).
+ user: Tests are done.
+ system: <context id="capability:todos:list">
+     - write docs
+     </context>
""")


@pytest.mark.anyio
async def test_a_list_rewritten_in_place_breaks_the_prefix(prompt_wire: PromptWire):
    # The same agent with the list as ordinary dynamic instructions: the second request rewrites it, and the check
    # says where. This is the failure the test above guards against.
    with FakeProvider(script=reply) as server:
        model = openai_chat_model(server.url, http_client=prompt_wire.http_client())
        agent = Agent(model, deps_type=list[str], instructions='Help with the todo list. Be brief.')

        @agent.instructions
        def rewritten_list(ctx: RunContext[list[str]]) -> str:
            return '\n'.join(f'- {item}' for item in ctx.deps)

        items = ['write tests']
        history = (await agent.run('What is first?', deps=items)).all_messages()
        items.append('write docs')
        await agent.run('I added one.', deps=items, message_history=history)
    with pytest.raises(AssertionError, match=r'request 1 does not extend request 0 byte for byte'):
        prompt_wire.assert_prefix_stable()
