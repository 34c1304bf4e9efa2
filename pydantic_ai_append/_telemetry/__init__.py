"""The telemetry wing: the provider's verdict on each request in tokens and dollars, against the prefix the window
kept and against rewrite mode. It reads what the append engine sent and what the provider reported; it changes
nothing sent.

- `observe`: after each response, its cache use on a span, and its figures in the response's metadata.
- `summary`: `CacheSummary`, a conversation's totals read back from its history.
"""
