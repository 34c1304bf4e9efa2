"""Shared test set-up: telemetry goes nowhere, and `capfire` is there for the tests that read spans."""

from __future__ import annotations

import logfire
from logfire.testing import capfire

logfire.configure(send_to_logfire=False, console=False)

__all__ = ('capfire',)
