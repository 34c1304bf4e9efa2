"""The project's benchmark: cache reuse, bytes and overhead of append mode, beside rewrite mode and native append.

Run it with `uv run python -m benchmarks` (offline, about 45 minutes on 2 cores); `--check` exits with status 1 when a target is
missed, `--json PATH` writes every figure, `--plot PATH` an SVG of each request's reused and uncached bytes,
`--only PARTS` runs only the parts named and `--paths PATHS` the wire scenario and the coding agent only on the
provider paths named (`--help` lists both). The modules:

- `scenario`: the conversation (static instructions, three changing blocks, a tool call every 3rd turn) and
  the agent of each policy: static, rewrite, append (this package), native (Pydantic AI's own, where it exists);
- `wire`: the scenario through the real provider SDKs against the test suite's fake provider on loopback (OpenAI Chat
  and Responses, Anthropic with and without inline system messages, Gemini, and Claude on Bedrock Converse),
  measured in cache-order segment bytes; `tokens`: the same in input tokens and dollars, as the fake provider's
  simulated caches report them; `breakpoints`: the Anthropic paths under each of Pydantic AI's cache settings;
- `coding`: a coding agent's long conversation (tool loops, a memory file, a todo list), in bytes, tokens and dollars;
  `windows`: the same with windows opened by price, against keeping every change and the hindsight-optimal schedule;
- `measure`: CPU time in rotated rounds, per-round paired ratios with their spread, and the timer of the plugin's
  hooks inside a run;
- `histories`: the function model, and histories of N turns built without N runs;
- `baselines`: the capabilities that do part of the plugin's work and nothing more, the floors its cost is told from;
- `overhead`: one `agent.run` on long histories with a function model, variants in rotated rounds, and the hooks'
  time against the number of past changes;
- `huge`: one-line edits to a 10 MB block, the hooks' time to deliver each and the stored history's growth;
- `servers`: the server cases: many conversations served in turn by one agent on history loaded per request, and
  instrumented runs with a tool loop;
- `stores`: a run behind a UI adapter, with and without a record store;
- `caches`: a conversation in progress with each of the plugin's process caches off, against all on;
- `pieces`: recording and rendering one change, checking a baseline, and verifying a 1 MB prefix, on their own;
- `startup`: the cassette checker's start-up, each command in a process of its own;
- `report`: the tables, the targets and their verdicts, and JSON, taken from each part's own (`wire_tables`,
  `overhead_tables`, `huge_tables`, `server_tables`), with `tables` for what every table shares; `plot` draws the
  SVG.
"""
