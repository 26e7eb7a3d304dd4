"""The call ledger of a council run ([BDA] §5: what a deliberation cost): one row per chat call
with its task, seat, endpoint, model, usage tokens, latency, retries, cache hit and cost.

Cost is priced per million tokens from the price table (``CouncilConfig.prices``: a mapping
model -> object with ``prompt_per_million`` and ``completion_per_million``). A cached reply cost
nothing this run: its row keeps the stored tokens and latency but its cost is 0.0, and the
summary's token, latency, retry and cost totals count only calls that went upstream. A model
missing from the price table has cost ``None`` and the summary says so in ``cost_note``.
"""
from __future__ import annotations

from collections.abc import Mapping

__all__ = ["Ledger"]


class Ledger:
    """Per-call rows and their totals.

    ``prices``: ``Mapping[str, Price]`` by model name (the requested model, as in the config),
    or ``None`` for no price table.
    """

    def __init__(self, prices: Mapping | None = None):
        self.prices = dict(prices or {})
        self._rows: list[dict] = []
        self._running = {"calls": 0, "cached": 0, "tokens": 0}

    def _cost(self, model: str, prompt: int, completion: int) -> float | None:
        price = self.prices.get(model)
        if price is None:
            return None
        return (prompt * float(price.prompt_per_million)
                + completion * float(price.completion_per_million)) / 1e6

    def record(self, req, reply, *, task: str, seat: str) -> dict:
        """Append the row for one call (``req``: ChatRequest, ``reply``: ChatReply); returns it."""
        cost = 0.0 if reply.cached else self._cost(req.model, reply.prompt_tokens, reply.completion_tokens)
        row = {
            "task": task,
            "seat": seat,
            "endpoint": req.endpoint,
            "model": req.model,
            "reply_model": reply.model,
            "sample": req.sample,
            "prompt_tokens": int(reply.prompt_tokens),
            "completion_tokens": int(reply.completion_tokens),
            "latency_s": float(reply.latency_s),
            "retries": int(reply.retries),
            "cached": bool(reply.cached),
            "cost": cost,
        }
        self._rows.append(row)
        self._running["calls"] += 1
        if reply.cached:
            self._running["cached"] += 1
        else:
            self._running["tokens"] += row["prompt_tokens"] + row["completion_tokens"]
        return row

    def running(self) -> dict:
        """``calls``, ``cached`` and upstream ``tokens`` so far, kept as calls are recorded (O(1),
        for progress reports; :meth:`summary` walks every row)."""
        return dict(self._running)

    def rows(self) -> list[dict]:
        """Copies of the rows, in call order."""
        return [dict(r) for r in self._rows]

    def summary(self) -> dict:
        """Totals: ``calls``, ``cached``, ``prompt_tokens``, ``completion_tokens``, ``cost`` (sum
        over priced models), ``latency_s``, ``retries`` (all over upstream calls only),
        ``per_model`` (the same per model; a model without a price has ``cost`` ``None``),
        ``cost_unknown_models`` (sorted) and ``cost_note`` (``None`` or
        ``"cost unknown for models [...]"``)."""
        def empty():
            return {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0,
                    "cost": 0.0, "latency_s": 0.0, "retries": 0}

        total = empty()
        per_model: dict[str, dict] = {}
        unknown: set[str] = set()
        for r in self._rows:
            m = per_model.get(r["model"])
            if m is None:
                m = per_model[r["model"]] = empty()
            if r["cached"]:             # a cache hit: counted, nothing else (its cost is 0.0)
                total["calls"] += 1
                total["cached"] += 1
                m["calls"] += 1
                m["cached"] += 1
                continue
            for acc in (total, m):
                acc["calls"] += 1
                acc["prompt_tokens"] += r["prompt_tokens"]
                acc["completion_tokens"] += r["completion_tokens"]
                acc["latency_s"] += r["latency_s"]
                acc["retries"] += r["retries"]
                if r["cost"] is not None and acc["cost"] is not None:
                    acc["cost"] += r["cost"]
            if r["cost"] is None:
                unknown.add(r["model"])
                m["cost"] = None
        total["per_model"] = per_model
        total["cost_unknown_models"] = sorted(unknown)
        total["cost_note"] = f"cost unknown for models {sorted(unknown)}" if unknown else None
        return total
