"""One model's price from the genai-prices table, printed as JSON: run as a script, in a child.

genai-prices builds its whole table (a 1.6 MB Python module of price objects) on the first
lookup: about 10 MiB that would stay resident in the service for the few floats it needs. The
service runs this file once per model instead (``bot/usage/pricing.py``) and keeps the floats.
It imports nothing of Loopgate's, so the child loads only the table.

    python _table_lookup.py PROVIDER BASE_URL MODEL     # BASE_URL may be empty

Prints ``null`` (the table does not know the model), or ``{"version", "tiered", "input",
"output", "cached_input", "cache_write"}`` in USD per million tokens (``tiered``: the price
depends on the context length, and the caller prices it with the table itself).
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from typing import Any


def lookup(provider: str, base_url: str, model: str) -> dict[str, Any] | None:
    import genai_prices
    from genai_prices import Usage, calc_price

    probe = Usage(input_tokens=1, output_tokens=1)
    for key, value in (("provider_id", provider), ("provider_api_url", base_url)):
        if not value:
            continue
        where: dict[str, Any] = {key: value}
        try:
            found = calc_price(probe, model, **where)
        except LookupError:
            continue
        price = found.model_price
        parts = [price.input_mtok, price.output_mtok, price.cache_read_mtok]
        parts.append(getattr(price, "cache_write_mtok", None))
        return {
            "version": genai_prices.__version__,
            "tiered": not all(value is None or isinstance(value, Decimal) for value in parts),
            "input": _base(parts[0]),
            "output": _base(parts[1]),
            "cached_input": None if parts[2] is None else _base(parts[2]),
            "cache_write": None if parts[3] is None else _base(parts[3]),
        }
    return None


def _base(value: Any) -> float:
    """A flat price, or the first tier of a tiered one (the note's figure)."""
    if value is None:
        return 0.0
    return float(getattr(value, "base", value))


if __name__ == "__main__":
    print(json.dumps(lookup(*sys.argv[1:4])))
