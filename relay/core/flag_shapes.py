"""Whether a flag (or a segment) of the client features format can be read: evaluated for
the Frontend API and served to SDKs. A document from an offline bootstrap file, an Edge
backup or an upstream may hold a flag of any shape; one of a shape the evaluator cannot
read (``"variants": ["blue"]``, ``"parameters": [...]``, a constraint's ``"values": 5``, a
variant's weight as text, ``"dependencies": ["parent"]``) must cost only itself: it is left
out (or its last good copy kept) and counted, never an error for the whole document.

The rules are the types the evaluator and the catalog read, no stricter: objects where
objects are expected, lists where lists are, names as strings, scalars (text, numbers,
booleans) where values are; anything else in a flag (fields this service does not know, a
payload of another shape) is passed on as it is. ``problem`` says what is wrong, None when
nothing is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import Counter

log = logging.getLogger(__name__)
LOGGED = 20
"""What one line names of what was left out: a document of thousands of bad flags logs one
line of bounded size, not thousands."""

MALFORMED = Counter(
    "relay_flags_malformed_total",
    "Flags and segments of a shape that cannot be read, each time a copy holding them is"
    " read (once per revision): left out, or their last good copy kept",
    ["outcome"],
)
LEFT_OUT, KEPT = MALFORMED.labels("left_out"), MALFORMED.labels("kept_last_good")

Check = Callable[[Any], str | None]


def _scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool)


def _optional_list(name: str, item: Check, null: bool = True) -> Check:
    """``name`` absent, null (when ``null``: the catalog reads some lists as
    ``.get(name, ())``, which a null breaks), or a list whose every item passes ``item``."""

    def check(parent: Any) -> str | None:
        value = parent.get(name)
        if value is None and (null or name not in parent):
            return None
        if not isinstance(value, list):
            return f"{name} is not a list"
        for index, found in enumerate(value):
            wrong = item(found)
            if wrong is not None:
                return f"{name}[{index}] {wrong}"
        return None

    return check


def _object(*checks: Check) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return "is not an object"
        return next((wrong for c in checks if (wrong := c(value)) is not None), None)

    return check


def _field(
    name: str, test: Callable[[Any], bool], what: str, required: bool = False, null: bool = True
) -> Check:
    """``name`` passes ``test``, or is absent (unless ``required``) or null (when ``null``)."""

    def check(parent: Any) -> str | None:
        value = parent.get(name)
        if value is None and (null or name not in parent):
            return f"has no {name}" if required else None
        return None if test(value) else f"{name} is not {what}"

    return check


def _value(value: Any) -> str | None:
    return None if _scalar(value) else "is not text, a number or a boolean"


def _id(value: Any) -> str | None:
    return None if isinstance(value, int) and not isinstance(value, bool) else "is no integer"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _string(value: Any) -> bool:
    return isinstance(value, str)


_CONSTRAINT = _object(
    _field("contextName", _scalar, "text"),
    _field("operator", _scalar, "text"),
    _optional_list("values", _value),
)
_OVERRIDE = _object(_field("contextName", _scalar, "text"), _optional_list("values", _value))
_VARIANT = _object(
    _field("name", _string, "text"),
    _field("weight", _number, "a number"),
    _field("stickiness", _scalar, "text"),
    _optional_list("overrides", _OVERRIDE),
)
_PARAMETERS = _field(
    "parameters",
    lambda value: isinstance(value, dict) and all(map(_scalar, value.values())),
    "an object of texts",
)
_STRATEGY = _object(
    _field("name", _string, "text"),
    _PARAMETERS,
    _optional_list("constraints", _CONSTRAINT, null=False),
    _optional_list("segments", _id, null=False),
    _optional_list("variants", _VARIANT),
)
_DEPENDENCY = _object(
    _field("feature", _string, "text", required=True),
    _optional_list("variants", _value),
)
_FEATURE = _object(
    _field("name", _string, "text", required=True),
    _field("project", _string, "text", null=False),
    _optional_list("strategies", _STRATEGY, null=False),
    _optional_list("variants", _VARIANT),
    _optional_list("dependencies", _DEPENDENCY),
)
_SEGMENT = _object(
    _field("id", lambda value: _id(value) is None, "an integer", required=True),
    _field("constraints", lambda value: isinstance(value, list), "a list", required=True),
    _optional_list("constraints", _CONSTRAINT),
)


def problem(feature: object) -> str | None:
    """What makes ``feature`` (one of a document's ``features``) unreadable, else None."""
    return _FEATURE(feature)


def segment_problem(segment: object) -> str | None:
    """What makes ``segment`` (one of a document's ``segments``) unreadable, else None."""
    return _SEGMENT(segment)


def named(feature: object) -> str | None:
    """A feature's name, when it has one (a feature unread may not)."""
    name = feature.get("name") if isinstance(feature, dict) else None
    return name if isinstance(name, str) else None


def tell_unread(unread: Sequence[object], kept: int, **where: str) -> None:
    """Tells of what a document's reading left out (``unread``, each as its ``str``), of
    which ``kept`` had a last good copy kept: one log line and the counts. Called once per
    copy of flags read (per revision), never per request."""
    if not unread:
        return
    LEFT_OUT.inc(len(unread) - kept)
    KEPT.inc(kept)
    log.warning(
        "flags that cannot be read: left out, or their last good copy kept",
        extra={
            **where,
            "unread": [str(u) for u in unread[:LOGGED]],
            "count": len(unread),
            "kept_last_good": kept,
        },
    )
