"""Tests of the example, run as a user would run it (the `WireCapture` option it relies on is tested in
`testing/test_capture.py`).

The example is the package's first impression and its claims are numbers, so its offline output is pinned
whole: a change to what the plugin sends shows up here as a changed byte count or a lost `100%`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import httpx2
import pytest
from inline_snapshot import snapshot

from pydantic_ai_append.testing import PrefixReuse

EXAMPLES = Path(__file__).parent.parent / 'examples'


def load_example(name: str) -> ModuleType:
    # `examples/` is not a package, so the file is loaded by path.
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f'{name}.py')
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: `dataclass` looks a class's module up while the module is still executing.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


todo_state = load_example('todo_state')


def test_todo_state_offline_output(capsys: pytest.CaptureFixture[str]):
    todo_state.main([])
    assert capsys.readouterr().out == snapshot("""\
> What should I do first?
Fix the flaky CI job first: until it passes reliably, you can't trust the tests you write.

> I fixed the flaky CI job, please tick it off.
Done, the CI job is ticked off. Next up: write tests.

> I added the release to the list. The tests are written too; what is left?
Ticked off the tests. Left: update the changelog, then release 0.1.0.

Bytes of each request in cache order (tools, then instructions and messages):

request         reused    new  total  changes delivered
      1              -    926    926  prefix: <context id="capability:todos:state">
      2     926 (100%)    196   1122  -
      3    1122 (100%)    428   1550  <context id="capability:todos:state">
      4    1550 (100%)    344   1894  <context-diff id="capability:todos:state">
      5    1894 (100%)    431   2325  <context id="capability:todos:state">

Every request after the first reused 100% of the previous request's bytes.
""")


@pytest.mark.parametrize('model', ['gemini:gemini-3-pro', 'gpt-5.2', 'openai:'])
def test_todo_state_rejects_an_unknown_model(model: str):
    with pytest.raises(SystemExit) as raised:
        todo_state.main([model])
    assert str(raised.value) == (
        f'Unknown model {model!r}: name one as openai:<model> or anthropic:<model> (such as openai:gpt-5.2), '
        'or give no model to run offline.'
    )


def test_todo_state_needs_the_providers_api_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv('ANTHROPIC_API_KEY', raising=False)
    with pytest.raises(SystemExit) as raised:
        todo_state.main(['anthropic:claude-sonnet-4-6'])
    assert str(raised.value) == snapshot(
        'Set ANTHROPIC_API_KEY to talk to anthropic:claude-sonnet-4-6, or give no model to run offline.'
    )


def test_todo_state_verdict_names_the_requests_that_lost_bytes():
    reuse = [PrefixReuse(0, 0, 1000, 1000), PrefixReuse(1, 999, 1, 1000), PrefixReuse(2, 1000, 0, 1000)]
    assert [todo_state.reused_cell(reuse, index) for index in range(3)] == ['-', '999 (99.9%)', '1000 (100%)']
    assert todo_state.verdict(reuse) == snapshot(
        "Not every request reused 100% of the previous request's bytes; these did not: 2."
    )


@pytest.mark.anyio
async def test_todo_state_offline_stand_in_refuses_what_it_does_not_script():
    async with httpx2.AsyncClient(transport=todo_state.offline_openai([])) as client:
        wrong_path = await client.get('https://api.openai.com/v1/models')
        exhausted = await client.post('https://api.openai.com/v1/chat/completions', json={'model': 'gpt-5.2'})
    assert [(wrong_path.status_code, wrong_path.json()), (exhausted.status_code, exhausted.json())] == snapshot(
        [
            (
                404,
                {
                    'error': {
                        'message': 'The offline stand-in serves POST /v1/chat/completions, not GET /v1/models.',
                        'type': 'invalid_request_error',
                    }
                },
            ),
            (
                400,
                {
                    'error': {
                        'message': 'All 0 replies of the offline script have been sent.',
                        'type': 'invalid_request_error',
                    }
                },
            ),
        ]
    )
