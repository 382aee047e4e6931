"""Keys the upstream refused for flags (``Refusals``)."""

from __future__ import annotations

import time
from collections import OrderedDict

from relay.core.errors import Forbidden, Unauthorized
from relay.core.keys import Principal, hash_key
from relay.edge.key_words import KeyWords
from relay.store.key_words import VOUCHED, Word

REFUSED_TTL = 60.0
MAX_REFUSED = 10_000


class Refusals:
    """Keys the upstream refused for flags, with its status: the relay's word on them
    (``relay.edge.key_words``), one for every worker. A refusal stands ``REFUSED_TTL``
    seconds; then one request of this worker asks the upstream again (a fetch with the
    key) while it stands for the others, for ``REFUSED_TTL`` more at most."""

    def __init__(self, words: KeyWords) -> None:
        self._words = words
        self._asking: OrderedDict[str, float] = OrderedDict()  # key hash -> until (monotonic)

    async def add(self, key: str, status: int) -> None:
        await self._words.say([Word(hash_key(key), status, time.time())])

    async def clear(self, key: str, principal: Principal) -> None:
        """The upstream answered flags to ``key`` again."""
        self._asking.pop(hash_key(key), None)
        await self._words.say([Word(hash_key(key), VOUCHED, time.time(), principal)])

    def check(self, key: str) -> int | None:
        """Raises the standing refusal of ``key``. One that has run out is returned (its
        status) for the caller to ask the upstream, and stands meanwhile for the others."""
        digest = hash_key(key)
        word = self._words.get(digest)
        if word is None or word.vouched:
            return None
        asking = self._asking.get(digest, 0.0) > time.monotonic()
        if asking or word.within(REFUSED_TTL, time.time()):
            raise self.error(word.status)
        self._asking[digest] = time.monotonic() + REFUSED_TTL
        self._asking.move_to_end(digest)
        while len(self._asking) > MAX_REFUSED:
            self._asking.popitem(last=False)
        return word.status

    @staticmethod
    def error(status: int) -> Forbidden | Unauthorized:
        if status == 403:
            return Forbidden("The upstream refuses this API token access to the flags")
        return Unauthorized("The provided API token is invalid or has expired")

    def status(self, key: str, otherwise: int) -> int:
        """The status ``key`` stands refused with, else ``otherwise``."""
        word = self._words.get(hash_key(key))
        return word.status if word is not None and not word.vouched else otherwise
