"""Which SDK keys a relay accepts: its configured keys, and keys the upstream vouched for.

Unknown keys are checked against the upstream's ``/edge/validate``, which takes a list: the
keys waiting to be checked go together, up to ``MAX_LIST`` a call and ``CONCURRENT_CHECKS``
calls at a time, so however many requests bring unknown keys, the upstream sees a few calls
(a request with 100 keys is one call, concurrent requests for one key share one). Answers
are the upstream's word on the key (``relay.edge.key_words``), one for every worker of the
relay: a key vouched for is accepted for ``key_cache_ttl``, one refused is refused for
``NEGATIVE_TTL``, then the upstream is asked again; refusals are held apart from the keys
vouched for, so a flood of made-up keys can push out only made-up keys, never a key an SDK
uses. Past ``MAX_WAITING`` keys waiting, an unknown key gets 503 at once rather than
queueing. A string that cannot be an Unleash key is invalid without a call. The flusher has
connections of its own (``relay.edge.upstream``): key checks never hold it up.

While the upstream cannot be reached, keys vouched for before keep working, even past their
TTL and across a restart, and an unknown key gets 503, not 401: the Node SDK stops sending
for good on 401 but retries on 5xx. After a failed call the upstream is not asked again for
``HOLD_OFF`` seconds (one warning in the log), so a down upstream is not hammered by every
new key; an upstream that answers 429 (this relay spent its budget of invalid keys there) is
left alone as long as its ``Retry-After`` says (at most ``MAX_HOLD_OFF``) and unknown keys
get 429.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence

from aiohttp import web
from prometheus_client import Gauge

from relay.core.errors import Throttled, Unavailable
from relay.core.keys import Principal, hash_key, parse_key, well_formed
from relay.edge.flags.store import FlagStore
from relay.edge.key_words import KeyWords
from relay.edge.upstream import UpstreamClient, UpstreamUnavailable
from relay.store.key_words import VOUCHED, Word
from relay.wire.common import MAX_LIST, KeyType

log = logging.getLogger(__name__)

WAITING = Gauge(
    "relay_key_checks_waiting",
    "Unknown SDK keys waiting for the upstream's answer",
    multiprocess_mode="livesum",
)

NEGATIVE_TTL = 60.0
CONCURRENT_CHECKS = 4
MAX_WAITING = 1_000
HOLD_OFF = 1.0
MAX_HOLD_OFF = 60.0  # the longest a 429's Retry-After from the upstream is honoured

Answer = Principal | None


class SdkKeyResolver:
    def __init__(
        self,
        configured: Mapping[KeyType, Iterable[str]],
        upstream: UpstreamClient,
        ttl: float,
        words: KeyWords,
        strict: bool = False,
        scopes_named: str = "client_tokens",
    ) -> None:
        """``configured``: the keys of each type accepted without asking the upstream;
        ``strict``: a key the upstream vouches for is refused unless its scope is within a
        configured client key's (Edge 20's strict mode); ``scopes_named``: what those keys
        are called where the operator set them (``TOKENS`` for ``relay edge``), for the
        refusal's words."""
        self._configured = {
            hash_key(spec.secret): spec.principal
            for type, keys in configured.items()
            for spec in (parse_key(key, type) for key in keys)
        }
        self._scopes = (
            [p for p in self._configured.values() if p.type is KeyType.CLIENT] if strict else None
        )
        self._upstream = upstream
        self._ttl = ttl
        self._words = words
        # key hash -> principal: keys that read flags before a restart (``remember``)
        self._remembered: dict[str, Principal] = {}
        self._scopes_named = scopes_named
        self._answers: dict[str, asyncio.Future[Answer]] = {}  # asked or about to be
        self._queue: dict[str, str] = {}  # key hash -> key, not asked yet
        self._calls: set[asyncio.Task[None]] = set()
        self._down_until = 0.0
        self._throttled = False  # the upstream's last refusal was a 429, not an outage

    def loading(self, store: FlagStore) -> Callable[[web.Application], AsyncIterator[None]]:
        """The upstream's words and the keys that read flags here loaded before the flag
        cache starts: keys it vouched for before a restart are known again while it is
        down."""

        async def ctx(app: web.Application) -> AsyncIterator[None]:
            await self._words.load()
            self.remember(await store.keys())
            yield

        return ctx

    def remember(self, keys: Mapping[str, Principal]) -> None:
        """Keys that read flags before a restart (key hash -> principal), from a relay older
        than the words of ``key_words``: trusted again only while the upstream cannot be
        asked, as keys past their TTL are."""
        self._remembered = {
            digest: principal
            for digest, principal in keys.items()
            if self._serves(principal) and digest not in self._configured
        }

    def listing(self) -> tuple[list[tuple[Principal, str]], int]:
        """For ``/internal-backstage/tokens``: the configured keys (Edge's ``Trusted``),
        those the upstream vouched for (``Validated``), and how many it refused lately."""
        trusted = [(principal, "Trusted") for principal in self._configured.values()]
        words = list(self._words.words())
        validated = [(w.principal, "Validated") for w in words if w.principal is not None]
        return trusted + validated, sum(1 for w in words if not w.vouched)

    async def current(self) -> None:
        await self._words.current()

    def known(self, key: str) -> Principal | None:
        digest = hash_key(key)
        configured = self._configured.get(digest)
        if configured is not None:
            return configured
        word = self._words.get(digest)
        if word is not None and self._serves_word(word) and word.within(self._ttl, time.time()):
            return word.principal
        return None

    async def resolve(self, key: str) -> Principal | None:
        return (await self.resolve_many([key]))[key]

    async def resolve_many(self, keys: Sequence[str]) -> dict[str, Answer]:
        answers: dict[str, Answer] = {}
        waits: dict[str, asyncio.Future[Answer]] = {}
        for key in keys:
            known = self.known(key)
            if known is not None:
                answers[key] = known
            elif not well_formed(key) or self._refused(hash_key(key)):
                answers[key] = None
            else:
                waits[key] = self._answer(key)
        self._call()  # the request's unknown keys go together
        for key, future in waits.items():  # shielded: the future is shared with other requests
            answers[key] = await asyncio.shield(future)
        return answers

    def _refused(self, digest: str) -> bool:
        word = self._words.get(digest)
        if word is not None:
            if word.vouched:  # refused only by strict mode: asked again after its TTL
                return not self._serves_word(word) and word.within(self._ttl, time.time())
            return word.within(NEGATIVE_TTL, time.time())
        return False

    def _answer(self, key: str) -> asyncio.Future[Answer]:
        """The future answer for ``key``: one already on its way, or a new one queued."""
        digest = hash_key(key)
        future = self._answers.get(digest)
        if future is not None:
            return future
        future = asyncio.get_running_loop().create_future()
        if time.monotonic() < self._down_until:
            self._settle(future, self._stale(digest), self._refusal())
        elif len(self._answers) >= MAX_WAITING:
            busy = Unavailable("Cannot validate the API key now: too many keys being checked")
            self._settle(future, self._stale(digest), busy)
        else:
            self._answers[digest] = future
            self._queue[digest] = key
            WAITING.inc()
        return future

    def _call(self) -> None:
        """Start calls for the queued keys, while fewer than ``CONCURRENT_CHECKS`` run."""
        while self._queue and len(self._calls) < CONCURRENT_CHECKS:
            batch = dict(list(self._queue.items())[:MAX_LIST])
            for digest in batch:
                del self._queue[digest]
            task = asyncio.create_task(self._ask(batch), name="validate-keys")
            self._calls.add(task)
            task.add_done_callback(self._called)

    def _called(self, task: asyncio.Task[None]) -> None:
        self._calls.discard(task)
        self._call()

    async def _ask(self, batch: dict[str, str]) -> None:
        """One upstream call for ``batch`` (key hash -> key); every waiting request gets its
        answer, whatever happens."""
        asked = self._words.mark()
        try:
            valid = await self._upstream.validate(list(batch.values()))
        except BaseException as exc:
            self._failed(batch, exc)
            if not isinstance(exc, Exception):
                raise
            return
        vouched = {digest: valid.get(key) for digest, key in batch.items()}
        said = time.time()
        overruled: set[str] = set()
        try:
            # stored for every worker before any request hears it (what the upstream said:
            # strict mode's refusal is each worker's own, from the same settings); a key
            # refused by a later call's answer, which came first, stays refused
            overruled = await self._words.say(
                (
                    Word(digest, VOUCHED if principal else 401, said, principal)
                    for digest, principal in vouched.items()
                ),
                asked,
            )
        finally:
            for digest, principal in vouched.items():
                answer = None if digest in overruled else self._served(principal)
                self._answers.pop(digest).set_result(answer)
            WAITING.dec(len(batch))

    def _served(self, principal: Principal | None) -> Principal | None:
        """The upstream's answer for a key, unless strict mode refuses it."""
        if principal is not None and not self._serves(principal):
            why = self._outside_why(principal)
            log.warning(f"key refused: {why} (strict_keys)", extra={"key": principal.display})
            return None
        return principal

    def _failed(self, batch: dict[str, str], exc: BaseException) -> None:
        """Every key of ``batch`` refused for now; when the upstream failed, the keys of the
        next ``HOLD_OFF`` seconds too (longer as its 429 asks, up to ``MAX_HOLD_OFF``)."""
        if not isinstance(exc, UpstreamUnavailable | asyncio.CancelledError):
            log.error("validating SDK keys failed", exc_info=exc)  # a bug: these keys only
        else:
            hold_off, throttled = HOLD_OFF, False
            if isinstance(exc, UpstreamUnavailable) and exc.retry_after is not None:
                hold_off, throttled = min(MAX_HOLD_OFF, max(HOLD_OFF, exc.retry_after)), True
            if time.monotonic() >= self._down_until:
                log.warning(
                    "cannot validate SDK keys: unknown keys are refused (503, or 429 when the"
                    " upstream answered 429) until the upstream answers again",
                    extra={"error": str(exc), "retry_in": hold_off},
                )
            self._down_until, self._throttled = time.monotonic() + hold_off, throttled
        for digest in batch:
            self._settle(self._answers.pop(digest), self._stale(digest), self._refusal())
        WAITING.dec(len(batch))

    def refusal(self, key: str) -> str | None:
        """Why a key the upstream vouched for is refused (strict)."""
        word = self._words.get(hash_key(key))
        if word is None or word.principal is None or self._serves(word.principal):
            return None
        return self._outside_why(word.principal)

    def _outside_why(self, principal: Principal) -> str:
        """In the operator's words: which of the key's environment or projects no
        configured scope covers."""
        assert self._scopes is not None  # only strict relays refuse a vouched key
        same = [s for s in self._scopes if s.environment == principal.environment]
        if not same:
            return (
                f"valid upstream, but its environment {principal.environment} is outside"
                f" {self._scopes_named}"
            )
        return (
            f"valid upstream, but its projects ({', '.join(principal.projects)}) are not all"
            f" among those {self._scopes_named} has for environment {principal.environment}"
        )

    def _serves(self, principal: Principal) -> bool:
        """Not strict, or ``principal`` within a configured client key's scope: the same
        environment, and all projects or a superset of its projects (as Edge's subsumes)."""
        return self._scopes is None or any(
            scope.environment == principal.environment
            and ("*" in scope.projects or set(principal.projects) <= set(scope.projects))
            for scope in self._scopes
        )

    def _refusal(self) -> Unavailable:
        """Why an unknown key cannot be checked during a hold-off: an upstream that is down
        (503), or one that asks this relay to check fewer keys (429, passed on)."""
        wait = self._down_until - time.monotonic()
        if self._throttled and wait > 0:
            message = "Cannot validate the API key now: the upstream asks for fewer key checks"
            return Throttled(message, wait)
        return Unavailable("Cannot validate the API key now: upstream unavailable, retry later")

    def _stale(self, digest: str) -> Principal | None:
        """A key vouched for before, past its TTL or before a restart: still good while the
        upstream cannot say, unless its latest word is a refusal."""
        word = self._words.get(digest)
        if word is not None:
            return word.principal if self._serves_word(word) else None
        return self._remembered.get(digest)

    def _serves_word(self, word: Word) -> bool:
        """A word vouching for a key this relay serves (strict mode: set at start, so a
        word stored before a restart is judged by today's scopes)."""
        return word.vouched and word.principal is not None and self._serves(word.principal)

    @staticmethod
    def _settle(future: asyncio.Future[Answer], stale: Principal | None, why: Unavailable) -> None:
        if stale is not None:
            future.set_result(stale)
            return
        future.set_exception(why)
        future.exception()  # retrieved here: a request that gave up would leave it unread
