"""The telemetry wing: the provider's verdict on each request in tokens and dollars, against the prefix the window
kept and against rewrite mode, and what the engine decided for each request. It reads what the append engine sent and
what the provider reported, and says only what Pydantic AI's own spans don't; it changes nothing sent.

- `observe`: after each response, its figures in the response's metadata, and what it saved and any shortfall of the
  expected cache read on a span.
- `summary`: `CacheSummary`, a conversation's totals read back from its history.
- `window`: before each request, the window it belongs to, why a window opened, and each change's form and size, on
  its span.
"""
