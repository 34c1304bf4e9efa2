"""The wire wing: provider request bodies read as the provider's cache reads them, shared by the guard's verifier,
the `testing` fixture and the cassette checker.

- `segments`: a request body split into its cache-order segments, and where two requests part.
- `conversation`: the requests of one conversation, with Responses' `previous_response_id` resolved, and which
  conversation a request continues.
- `transport`: what the HTTP transport wrappers share (a reply teed as the client reads it).
- `botocore_hooks`: the same reading of a boto3 client's Bedrock requests, through botocore's own events.
- `encoding`: a body's `content-encoding` undone, for the wrappers' replies and the checker's cassettes.
- `causes`: why a request moved the prefix, told from the plugin's elements in it.
- `changes`: the changes the plugin delivered, found again in a request's messages, for `causes`.
- `usage`: the provider's own cache figures, read from its replies.
- `cache_rules`: the request settings each provider documents as breaking its cache.
"""
