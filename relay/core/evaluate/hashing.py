"""The SDKs' MurmurHash3 normalisation: which of 100 buckets (rollouts) or which point of a
variant set's total weight a ``"{groupId}:{value}"`` falls on.

``mmh3`` (C) hashes a short key in well under a microsecond, where a pure-Python MurmurHash3
takes several; the ``groupId:`` prefix is built once at compile time.
"""

from __future__ import annotations

import mmh3

VARIANT_SEED = 86028157  # the seed every SDK uses for variants (rollouts use 0)


def bucket(prefix: str, value: str) -> int:
    """1 to 100: a rollout of ``n`` % takes the values whose bucket is at most ``n``."""
    return int(mmh3.hash(prefix + value, 0, False)) % 100 + 1


def variant_point(prefix: str, value: str, total: int) -> int:
    """1 to ``total``: the first variant whose running weight reaches it is chosen."""
    return int(mmh3.hash(prefix + value, VARIANT_SEED, False)) % total + 1
