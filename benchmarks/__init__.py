"""The project's benchmark: cache reuse, bytes and overhead of append mode, beside rewrite mode and native append.

Run it with `uv run python -m benchmarks` (offline, a few minutes); `--json PATH` writes every figure and
`--plot PATH` an SVG of each request's reused and uncached bytes. The modules:

- `scenario`: the conversation (static instructions, three changing blocks, a tool call every 3rd turn) and
  the agent of each policy: static, rewrite, append (this package), native (Pydantic AI's own, where it exists);
- `wire`: the scenario through the real provider SDKs against the test suite's fake provider on loopback,
  measured in cache-order segment bytes;
- `overhead`: one `agent.run` on long histories with a function model, variants interleaved;
- `pieces`: recording and rendering one change, and verifying a 1 MB prefix, on their own;
- `report`: the tables, the targets and their verdicts, JSON and the plot.
"""
