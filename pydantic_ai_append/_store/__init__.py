"""The record store wing: each conversation's records kept on the server, for history that comes back without them.

- `protocol`: what a store is (`RecordStore`, `SyncRecordStore`), its errors, and the checks the capability applies.
- `memory`: `InMemoryRecordStore`, the default, for one process.
- `sqlite`: `SQLiteRecordStore`, a file shared by one machine's processes.
- `redis`: `RedisRecordStore`, shared by processes on several machines.
- `reattach`: a history's records saved as an entry, and put back into history that came through a UI adapter.
- `tenant`: whose an entry is: the tenant the server names, in the entry's key.
"""
