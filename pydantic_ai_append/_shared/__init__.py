"""What every wing shares: the process's memory across conversations, and the checks of a spec entry's options.

- `cache`: `BoundedCache`, the caches for the whole process, bounded together by one memory limit and safe between
  threads (`set_memory_limit`).
- `spec`: the checks that refuse a spec entry's option by name, for `AppendInstructions` and `PrefixGuard`.
"""
