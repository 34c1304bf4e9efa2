"""`python -m pydantic_ai_append`: the command line, as the `pydantic-ai-append` console script runs it.

`python -m pydantic_ai_append check PATH...` checks that the conversations recorded in cassettes keep their
prompt-cache prefix; see `_check`.
"""

import sys

from ._check.cli import main

if __name__ == '__main__':  # not when imported, as the docs tests import every module
    sys.exit(main())
