"""Benchmark of the evaluator (``relay.core.evaluate``) in this process, no HTTP: one
request's worth of work is every flag of a document evaluated for one context.

    python bench/evaluate.py            # 100 and 5 flags, 3 alternated runs of 1 s per figure
    python bench/evaluate.py --smoke    # tiny, for CI (no figure is asserted)

The 100-flag document is about 100 kB in the client features format (what
``GET /api/client/features`` answers): flexibleRollout with constraints and variants, a user
list, segments, a few dependencies; the 5-flag one is the first five. Side by side in one
run: a new context on every request (a new user each time) and the same context repeated
(as a browser polls; a typical one: the evaluator keeps no answer per context, so this row
only shows what a context costs to walk), and Unleash's own engine (``yggdrasil_engine``,
what the Python SDK embeds: one ``check_variant`` per flag, which answers both the state
and the variant) when installed.
Each row prints µs per request (all flags), flags/s and requests/s of the median run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from relay.core.evaluate import Context, compile_features

FLAGS = 100
REGIONS = ["eu-west", "eu-north", "us-east", "us-west", "ap-south"]


def flag(i: int) -> dict[str, Any]:
    """About 1 kB: a rollout with constraints and two variants, and a user list."""
    variants = [
        {
            "name": name,
            "weight": 500,
            "weightType": "variable",
            "stickiness": "userId",
            "payload": {"type": "json", "value": json.dumps({"color": name, "size": i})},
        }
        for name in ("blue", "green")
    ]
    strategies = [
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": str(i % 100), "stickiness": "userId", "groupId": f"f{i}"},
            "constraints": [
                {"contextName": "region", "operator": "IN", "values": REGIONS[: 2 + i % 3]},
                {"contextName": "appVersion", "operator": "SEMVER_GTE", "value": "2.1.0"},
                {
                    "contextName": "email",
                    "operator": "STR_ENDS_WITH",
                    "values": ["@example.com", "@example.org"],
                    "caseInsensitive": True,
                },
            ],
            "variants": variants,
            "segments": [1 + i % 3],
        },
        {
            "name": "userWithId",
            "parameters": {"userIds": ",".join(f"user-{n}" for n in range(i, i + 6))},
            "constraints": [],
        },
    ]
    feature: dict[str, Any] = {
        "name": f"feature-{i:03d}-checkout-redesign",
        "type": "release",
        "description": "A flag of a realistic size, with a sentence of description.",
        "project": "default",
        "enabled": i % 10 != 0,
        "stale": False,
        "impressionData": i % 7 == 0,
        "strategies": strategies,
        "variants": [],
    }
    if i % 20 == 19:
        feature["dependencies"] = [{"feature": f"feature-{i - 1:03d}-checkout-redesign"}]
    return feature


def document(flags: int) -> dict[str, Any]:
    segments = [
        {"id": n, "constraints": [{"contextName": "plan", "operator": "IN", "values": ["pro"]}]}
        for n in (1, 2, 3)
    ]
    return {"version": 2, "features": [flag(i) for i in range(flags)], "segments": segments}


def context(n: int) -> dict[str, Any]:
    return {
        "userId": f"user-{n}",
        "sessionId": f"session-{n % 1000}",
        "appName": "web",
        "environment": "production",
        "properties": {
            "region": REGIONS[n % 5],
            "appVersion": f"2.{n % 4}.0",
            "email": f"someone{n}@Example.com",
            "plan": "pro" if n % 2 else "free",
        },
    }


def ours(doc: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    compiled = compile_features(doc)
    now = datetime.now(UTC)

    def evaluate(raw: dict[str, Any]) -> Any:
        ctx = Context(
            current_time=now,
            app_name=raw["appName"],
            environment=raw["environment"],
            user_id=raw["userId"],
            session_id=raw["sessionId"],
            properties=raw["properties"],
        )
        return compiled.evaluate(ctx)

    return evaluate


def typical(doc: dict[str, Any]) -> int:
    """The context whose count of enabled flags is the median one: the repeated context
    walks a typical path through the flags."""
    evaluate = ours(doc)
    enabled = sorted((sum(e.enabled for e in evaluate(context(n))), n) for n in range(1000))
    return enabled[len(enabled) // 2][1]


def yggdrasil(doc: dict[str, Any]) -> Callable[[dict[str, Any]], Any] | None:
    try:
        from yggdrasil_engine.engine import UnleashEngine
    except ImportError:
        return None
    engine = UnleashEngine()
    engine.take_state(json.dumps(doc))
    names = [f["name"] for f in doc["features"]]
    return lambda raw: [engine.check_variant(name, raw) for name in names]


def measure(evaluate: Callable[[dict[str, Any]], Any], same: int | None, seconds: float) -> float:
    """Requests per second: each request evaluates every flag for one context (``same``:
    always that one, else 1,000 users in turn)."""
    contexts = [context(n) for n in range(1000)] if same is None else [context(same)]
    done, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        for _ in range(20):
            evaluate(contexts[done % len(contexts)])
            done += 1
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    runs, seconds = (1, 0.05) if args.smoke else (args.runs, args.seconds)
    for flags in (12, 5) if args.smoke else (FLAGS, 5):
        doc = document(flags)
        started = time.perf_counter()
        compile_features(doc)
        compile_ms = (time.perf_counter() - started) * 1000
        print(
            f"{flags} flags, {len(json.dumps(doc)) / 1000:.0f} kB, compiled in {compile_ms:.1f} ms"
        )
        same = typical(doc)
        rows: list[tuple[str, Callable[[dict[str, Any]], Any], int | None]] = [
            ("relay, new context", ours(doc), None),
            ("relay, repeated context", ours(doc), same),
        ]
        engine = yggdrasil(doc)
        if engine is not None:
            rows.append(("yggdrasil, new context", engine, None))
            rows.append(("yggdrasil, repeated context", engine, same))
        figures: dict[str, list[float]] = {label: [] for label, _, _ in rows}
        for _ in range(runs):  # alternated: the machine's speed drifts
            for label, evaluate, context_number in rows:
                figures[label].append(measure(evaluate, context_number, seconds))
        for label, _, _ in rows:
            rate = statistics.median(figures[label])
            print(
                f"  {label:26} {1e6 / rate:9.1f} µs/request  {rate * flags:12,.0f} flags/s"
                f"  {rate:10,.0f} requests/s"
            )


if __name__ == "__main__":
    main()
