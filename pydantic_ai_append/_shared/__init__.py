"""What every wing shares: the process's memory across conversations, a spec entry's checks, and what a provider's
cache costs.

- `cache`: `BoundedCache`, the caches for the whole process, bounded together by one memory limit and safe between
  threads (`set_memory_limit`).
- `spec`: the checks that refuse a spec entry's option by name, for `AppendInstructions` and `PrefixGuard`.
- `prices`: `CachePrices`, a model's input prices with its cache, from `genai-prices` or the provider's ratios.
- `schedule`: when a window's carried changes cost more than a new window: the online rule the engine decides by,
  and the hindsight optimum the benchmark holds it to.
"""
