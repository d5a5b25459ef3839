"""Usage accounting, prices and limits (docs/usage.md).

``Meter`` is the agent core's usage meter: each model call is priced (``pricing``), added to
the hourly rollup (``bot/storage/usage.py``) and checked against the limits (``limits``,
``counters``) before it is made.
"""

from bot.usage.counters import BudgetCounters, LocalCounters, Recount, Refusal
from bot.usage.limits import Scope, scopes_of
from bot.usage.meter import CallSink, CallUsage, Meter
from bot.usage.pricing import Price, PriceBook

__all__ = [
    "BudgetCounters",
    "CallSink",
    "CallUsage",
    "LocalCounters",
    "Meter",
    "Price",
    "PriceBook",
    "Recount",
    "Refusal",
    "Scope",
    "scopes_of",
]
