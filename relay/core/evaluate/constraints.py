"""Constraints compiled into checks: the value parsed once (numbers, dates, SemVer, RE2,
networks), the context field resolved once, inversion folded in.

The rules are yggdrasil's (the engine of the Python, Ruby, .NET... SDKs), which pass the
client specification: a missing context value fails every operator but ``NOT_IN`` (before
inversion); ``IN``/``NOT_IN`` compare exactly (``caseInsensitive`` applies to the ``STR_*``
operators and ``REGEX``); a regular expression matches anywhere in the value. What cannot be
evaluated (an unknown operator, a ``value`` that does not parse as its operator needs, a
``v``-prefixed SemVer) makes the constraint false whatever ``inverted`` says, as the Node SDK
does; yggdrasil turns the whole flag off instead. An expression RE2 refuses never matches
(before inversion), as in both. A context's number is read as Rust reads it (yggdrasil);
a date in a property (not ``currentTime``) must be RFC 3339 to the second or millisecond,
as a constraint's own date.

Work per context value is bounded whatever an admin saved, as a caller chooses the values
(4,096 characters each): ``STR_CONTAINS`` looks for all its values in one pass (an
Aho-Corasick automaton: 1,000 values against 4 kB took 1 ms with a scan per value, 0.05 ms
so); ``REGEX`` runs RE2 (linear time, but time per byte grows with the pattern's program:
``(?:.?){1000}z`` took 280 ms over 4,096 CJK characters) on a value of at most
``REGEX_WORK`` / (the pattern's RE2 program size) bytes of UTF-8, each expression within
``REGEX_MEMORY``. A longer value fails the constraint whatever ``inverted`` says, as what
cannot be evaluated does. The patterns flags use (15 to 70 instructions: an email, a UUID,
a version, a user agent) read 7,000 bytes or more: any ASCII value a context holds, and
4,096 CJK characters up to 40 instructions; the SDKs would evaluate the whole value
(slowly), so only pathological pairs of pattern and value answer otherwise.
"""

from __future__ import annotations

import ipaddress
import math
import operator
import re
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import ahocorasick  # type: ignore[import-not-found]

from relay.core.evaluate.context import CLOCK, SESSION, Context
from relay.wire.strategies import REGEX_MEMORY, date_time, number, semver

Check = Callable[[Context], bool]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

Order = Callable[[Any, Any], bool]

_ORDER: dict[str, Order] = {
    "GT": operator.gt,
    "GTE": operator.ge,
    "LT": operator.lt,
    "LTE": operator.le,
    "EQ": operator.eq,
}
_DATE_ORDER: dict[str, Order] = {"AFTER": operator.gt, "BEFORE": operator.lt}
# what Rust's f64::from_str reads (yggdrasil parses a context value so): no spaces, no "_".
# Each digit has one place to go: a context value is the caller's, and "[0-9]+\.?[0-9]*"
# tried every split of a long run of digits before failing (quadratic: 0.7 s for 8,000)
_FLOAT = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)", re.I
)


_KNOWN = 256
_UNSEEN: Any = object()
REGEX_WORK = 500_000
"""Bytes of a value times instructions of a pattern's program that one search may cost:
RE2's worst case (its NFA, when its DFA gives up) is linear in both, ~2.5 ns each here,
so about 1.3 ms a search at most."""


def reserved() -> dict[type, int]:
    """What an expression may hold outside Python's reach, at its bound: what a compiled
    scope's measure counts for it (``relay.core.memory``). None before RE2 is loaded."""
    loaded = sys.modules.get("re2")
    return {} if loaded is None else {loaded._re2.RE2: REGEX_MEMORY}


def never(context: Context) -> bool:
    return False


def compile_constraint(raw: Mapping[str, Any]) -> Check:
    """One constraint of the client features format as a check of a context; one on the
    clock, or on a session the server made up, tells the context it read chance
    (``Context.varied``)."""
    check, name = _compile(raw), str(raw.get("contextName", ""))
    if name not in (CLOCK, SESSION) or check is never:
        return check

    def chance(context: Context) -> bool:
        if name == CLOCK:
            context.varied()
        else:
            context.session()
        return check(context)

    return chance


def _compile(raw: Mapping[str, Any]) -> Check:
    name = str(raw.get("contextName", ""))
    op = str(raw.get("operator", ""))
    inverted = raw.get("inverted") is True
    case_insensitive = raw.get("caseInsensitive") is True
    values = [str(v) for v in raw.get("values") or ()]
    value = raw.get("value")
    if op in ("IN", "NOT_IN"):
        return _membership(name, frozenset(values), op == "NOT_IN", inverted)
    if op.startswith("STR_"):
        return _text(name, op, values, case_insensitive, inverted)
    if op == "IN_CIDR":
        return _networks(name, values, inverted)
    if not isinstance(value, str):
        return never
    if op.startswith("NUM_"):
        return _number(name, _ORDER.get(op[4:]), number(value), inverted)
    if op.startswith("DATE_"):
        return _date(name, _DATE_ORDER.get(op[5:]), date_time(value), inverted)
    if op.startswith("SEMVER_"):
        return _semver(name, _ORDER.get(op[7:]), value, inverted)
    if op == "REGEX":
        return _regex(name, value, case_insensitive, inverted)
    return never


def _membership(name: str, values: frozenset[str], negated: bool, inverted: bool) -> Check:
    flip = negated != inverted

    def check(context: Context) -> bool:
        found = context.values.get(name)
        if found is None:
            return negated != inverted  # only NOT_IN holds for a missing value
        return (found in values) != flip

    return check


def _text(name: str, op: str, values: list[str], case_insensitive: bool, inverted: bool) -> Check:
    wanted = tuple(v.lower() for v in values) if case_insensitive else tuple(values)
    test: Callable[[str], bool]
    if op == "STR_STARTS_WITH":
        test = operator.methodcaller("startswith", wanted)
    elif op == "STR_ENDS_WITH":
        test = operator.methodcaller("endswith", wanted)
    elif op == "STR_CONTAINS":
        test = _contains(wanted)
    else:
        return never

    def check(context: Context) -> bool:
        found = context.values.get(name)
        if found is None:
            return inverted
        return test(found.lower() if case_insensitive else found) != inverted

    return check


def _contains(wanted: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a text contains one of ``wanted``, in one pass over it whatever their number
    (``any(w in found for w in wanted)`` scans the text once per value)."""
    if not wanted or "" in wanted:
        return lambda found: bool(wanted)
    if len(wanted) == 1:
        [only] = wanted
        return lambda found: only in found
    automaton = ahocorasick.Automaton()
    for word in wanted:
        automaton.add_word(word, None)
    automaton.make_automaton()
    find = automaton.iter

    def contains(found: str) -> bool:
        return next(find(found), None) is not None

    return contains


def _context_number(found: str) -> float:
    return float(found) if _FLOAT.fullmatch(found) else math.nan


def _equal(a: float, b: float) -> bool:
    return abs(a - b) < sys.float_info.epsilon  # as yggdrasil compares


def _number(name: str, order: Order | None, target: float | None, inverted: bool) -> Check:
    if order is None or target is None:
        return never
    compare = _equal if order is operator.eq else order

    def check(context: Context) -> bool:
        found = context.values.get(name)
        parsed = math.nan if found is None else _context_number(found)
        return compare(parsed, target) != inverted  # NaN compares false

    return check


def _date(
    name: str,
    order: Order | None,
    target: datetime | None,
    inverted: bool,
) -> Check:
    """``currentTime`` is the caller's clock as given; any other field is parsed."""
    if order is None or target is None:
        return never
    if name == CLOCK:

        def clock(context: Context) -> bool:
            return order(context.current_time, target) != inverted

        return clock

    def check(context: Context) -> bool:
        found = context.values.get(name)
        moment = None if found is None else date_time(found)
        return (moment is not None and order(moment, target)) != inverted

    return check


def _semver(name: str, order: Order | None, value: str, inverted: bool) -> Check:
    """A context's version is parsed once per distinct value (apps have few versions): up to
    ``_KNOWN`` of them are remembered per constraint, each at most 64 characters."""
    version = semver(value)
    if order is None or version is None:
        return never
    target = version.precedence
    known: dict[str, tuple[Any, ...] | None] = {}

    def check(context: Context) -> bool:
        found = context.values.get(name)
        if found is None:
            return inverted
        key = known.get(found, _UNSEEN)
        if key is _UNSEEN:
            parsed = semver(found)
            key = None if parsed is None else parsed.precedence
            if len(known) < _KNOWN and len(found) <= 64:
                known[found] = key
        return (key is not None and order(key, target)) != inverted

    return check


def _regex(name: str, pattern: str, case_insensitive: bool, inverted: bool) -> Check:
    """A search of at most ``REGEX_WORK`` / (the program's size) bytes of the value: a
    longer value fails whatever ``inverted`` says (see the module's docstring)."""
    import re2  # type: ignore[import-untyped]  # here: a service whose flags have no REGEX
    # never loads it (a megabyte of every relay's memory)

    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not case_insensitive
    options.max_mem = REGEX_MEMORY
    try:
        compiled = re2.compile(pattern, options)
    except re2.error:
        return lambda context: inverted
    search, longest = compiled.search, REGEX_WORK // max(1, compiled.programsize)

    def check(context: Context) -> bool:
        found = context.values.get(name)
        if found is None:
            return inverted
        if len(found) > longest:  # a character is a byte at least
            return False
        text = found.encode()
        return len(text) <= longest and (search(text) is not None) != inverted

    return check


def network(text: str) -> Network | None:
    """An address or a CIDR block (host bits allowed, as the SDKs take them), else None."""
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return None


def address_in(networks: tuple[Network, ...]) -> Callable[[str | None], bool]:
    """Whether an address (as text) is in one of ``networks``."""

    def inside(found: str | None) -> bool:
        if found is None or not networks:
            return False
        try:
            address = ipaddress.ip_address(found)
        except ValueError:
            return False
        return any(address in net for net in networks)

    return inside


def _networks(name: str, values: list[str], inverted: bool) -> Check:
    inside = address_in(tuple(n for n in map(network, values) if n is not None))

    def check(context: Context) -> bool:
        return inside(context.values.get(name)) != inverted

    return check
