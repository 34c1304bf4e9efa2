"""`AppendInstructions` on Pydantic AI's `MCPSamplingModel`: an agent whose model is the MCP client's sampling.

`MCPSamplingModel` sends the instructions recorded on the requests it is given as the sampling request's system
prompt, rather than the instruction parts of the request parameters that other models read, so the window's prefix
must be on the request sent too. The MCP session is a fake whose `create_message` writes down what it is sent.
"""

from __future__ import annotations

from typing import Any, cast

from inline_snapshot import snapshot
from mcp import ServerSession
from mcp.types import CreateMessageResult, SamplingMessage, TextContent
from pydantic_ai import Agent
from pydantic_ai.models.mcp_sampling import MCPSamplingModel

from pydantic_ai_append import AppendInstructions


class RecordingSession:
    """The part of an MCP `ServerSession` that `MCPSamplingModel` calls, answering every request with `ok`."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[str]]] = []
        """Each request's system prompt, and its messages as role and text."""

    async def create_message(self, messages: list[SamplingMessage], **options: Any) -> CreateMessageResult:
        texts = [f'{message.role}: {getattr(message.content, "text", message.content)}' for message in messages]
        self.sent.append((options['system_prompt'], texts))
        return CreateMessageResult(role='assistant', content=TextContent(type='text', text='ok'), model='client-model')


def test_the_clients_model_gets_the_windows_prefix_from_the_first_request():
    session = RecordingSession()
    todos = AppendInstructions(id='todos')
    values = ['- [ ] a']
    todos.instructions(name='state')(lambda: values[-1])
    agent = Agent(MCPSamplingModel(cast('ServerSession', session)), instructions='Be brief.', capabilities=[todos])
    history = agent.run_sync('one').all_messages()
    values.append('- [ ] b')
    agent.run_sync('two', message_history=history)
    first, second = session.sent
    assert first == snapshot(
        (
            """\
Be brief.

<context id="capability:todos:state">
- [ ] a
</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.\
""",
            ['user: one'],
        )
    )
    # `MCPSamplingModel` joins the instructions of every request in history, so the prefix stays a prefix.
    assert second[0].startswith(first[0])
    assert second[1][-1] == snapshot("""\
user: <system><context id="capability:todos:state">
- [ ] b
</context></system>\
""")
