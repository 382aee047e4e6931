"""The context a flag is evaluated for, and how a constraint's ``contextName`` or a
stickiness reads it (resolved once at compile time into a getter).

``current_time`` is the server's clock, given by the caller: a caller's own ``currentTime``
is never trusted (Unleash 8.2 does the same), so date constraints cannot be steered by it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType

Getter = Callable[["Context"], str | None]
Random = Callable[[int, int], int]  # randrange(start, stop): the injectable random source

_NO_PROPERTIES: Mapping[str, str] = MappingProxyType({})
CLOCK = "currentTime"
"""The ``contextName`` of the server's clock: a check or stickiness reading it varies."""
SESSION = "sessionId"


@dataclass(frozen=True, slots=True)
class Context:
    """Who and where a flag is evaluated for. An absent field is None (an empty ``userId``
    or ``sessionId`` from a request is the caller's to turn into None, as Unleash does)."""

    current_time: datetime
    app_name: str | None = None
    environment: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    remote_address: str | None = None
    properties: Mapping[str, str] = field(default_factory=lambda: _NO_PROPERTIES)
    session_made_up: bool = False
    """``session_id`` is one the server made up (the caller gave none, Unleash adds a random
    one): an evaluation that reads it reads chance (``session``)."""
    values: Mapping[str, str | None] = field(init=False, repr=False, compare=False)
    """What each ``contextName`` reads (a field, else a property), resolved once per
    context: a check reads it with one ``dict.get`` instead of calling a getter."""
    varies: bool = field(default=False, init=False, repr=False, compare=False)
    """Whether an evaluation for this context read the clock or chance (see ``varied``)."""
    nameless_draws: int = field(default=0, init=False, repr=False, compare=False)
    """Draws made for want of anyone to hash (see ``nameless``): a caller compares it
    before and after one flag's evaluation."""

    def __post_init__(self) -> None:
        if self.current_time.utcoffset() is None:  # it would not compare with a date's
            raise ValueError("a context's current_time must carry its offset (aware)")
        values: dict[str, str | None] = dict(self.properties)
        values.update(
            userId=self.user_id,
            sessionId=self.session_id,
            remoteAddress=self.remote_address,
            appName=self.app_name,
            environment=self.environment,
            currentTime=_current_time(self.current_time),
        )
        object.__setattr__(self, "values", values)

    def varied(self) -> None:
        """Told by whatever reads the clock or chance while evaluating: an answer that did
        not is the same for every equal context and the same flags, and may be kept (the
        Frontend API's answers); one that did may not. The evaluator knows what it reads, so
        it says so rather than a caller guessing from the flags' JSON."""
        object.__setattr__(self, "varies", True)

    def session(self) -> str | None:
        """``session_id``, read by an evaluation: a made-up one is chance (``varied``)."""
        if self.session_made_up:
            self.varied()
        return self.session_id

    def nameless(self) -> None:
        """Told by a ``default`` stickiness that found neither userId nor a sessionId of the
        caller's (none, or one the server made up), as it draws by chance instead: the
        answer is a coin toss because the context names no one (what OFREP calls a missing
        targeting key), unlike a draw the flag asks for (``random`` stickiness,
        ``gradualRolloutRandom``)."""
        object.__setattr__(self, "nameless_draws", self.nameless_draws + 1)
        self.varied()

    def someone(self) -> bool:
        """The context names a user or a session of the caller's; else ``nameless``."""
        if self.user_id is not None or (self.session_id is not None and not self.session_made_up):
            return True
        self.nameless()
        return False


def _current_time(moment: datetime) -> str:
    """``currentTime`` as text, for the rare constraint that reads it as a string."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def getter(context_name: str) -> Getter:
    """What ``contextName`` reads: a field of the context, else ``properties[contextName]``."""
    if context_name == CLOCK:

        def clock(context: Context) -> str | None:
            context.varied()
            return context.values.get(CLOCK)

        return clock
    if context_name == SESSION:
        return Context.session

    def read(context: Context) -> str | None:
        return context.values.get(context_name)

    return read


def rollout_stickiness(stickiness: str, randrange: Random) -> Getter:
    """The value a ``flexibleRollout`` hashes: ``default`` is userId, then sessionId, then a
    random number (as yggdrasil, 1 to 9999); ``random`` is always random; any other reads
    that field or property (absent: the strategy does not match)."""

    def random_value(context: Context) -> str:
        context.varied()
        return str(randrange(1, 10000))

    if stickiness == "random":
        return random_value
    if stickiness != "default":
        return getter(stickiness)

    def default(context: Context) -> str:
        if context.user_id is not None:
            return context.user_id
        context.someone()
        return context.session() or random_value(context)

    return default


def variant_stickiness(stickiness: str | None) -> Getter:
    """The value a variant's weight is chosen by: ``default`` (or none) is userId, then
    sessionId; any other reads that field or property. None means random (the caller's):
    only asked when the weights do choose (the caller's), so a ``default`` that finds no
    one says so (``Context.nameless``)."""
    if stickiness is not None and stickiness != "default":
        return getter(stickiness)

    def default(context: Context) -> str | None:
        if context.user_id is not None:
            return context.user_id
        context.someone()
        return context.session()

    return default
