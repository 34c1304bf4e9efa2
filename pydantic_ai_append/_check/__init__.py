"""The cassette checker, `pydantic-ai-append check`: recorded provider exchanges judged request by request.

- `cassettes`: cassette files read in the formats vcrpy and Pydantic AI's own suite write.
- `verdicts`: each conversation in a cassette, and whether each request kept the previous one's prefix.
- `reports`: the verdicts as the checker gives them, conversation by conversation and request by request.
- `cli`: the command line and its reports.
"""
