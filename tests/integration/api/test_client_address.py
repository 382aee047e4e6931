"""The caller's address behind reverse proxies (issue 21): forwarded addresses are believed
only from trusted proxies, read from the right, so a caller can never choose its own; the
invalid-key budget is kept per caller, not per proxy; malformed headers are never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import MakeClient, auth

from relay.api.client_address import ProxyTrust
from relay.settings import SettingsError, load_settings

BAD_KEY = "default:development.not-a-key-anyone-made-0123456789"
PROXIES = ProxyTrust.of(True, ["10.0.0.0/8", "2001:db8:ffff::/48"])


@pytest.mark.parametrize(
    ("peer", "xff", "forwarded", "caller"),
    [
        # a peer that is no trusted proxy: its headers are the caller's words, ignored
        ("203.0.113.9", ["198.51.100.1"], [], "203.0.113.9"),
        # the proxy's hop: what it appended
        ("10.0.0.2", ["198.51.100.1"], [], "198.51.100.1"),
        # the caller wrote a left part: never used
        ("10.0.0.2", ["1.1.1.1, 198.51.100.1"], [], "198.51.100.1"),
        # two trusted proxies in a row, and header lines that split the list
        ("10.0.0.2", ["1.1.1.1, 198.51.100.1", "10.9.9.9"], [], "198.51.100.1"),
        # only trusted hops: the left-most of them
        ("10.0.0.2", ["10.1.1.1, 10.2.2.2"], [], "10.1.1.1"),
        # garbage where the caller should be: the last trusted hop, not the garbage
        ("10.0.0.2", ["1.1.1.1, not-an-ip"], [], "10.0.0.2"),
        ("10.0.0.2", ["1.1.1.1, not-an-ip, 10.3.3.3"], [], "10.3.3.3"),
        ("10.0.0.2", [""], [], "10.0.0.2"),
        # RFC 7239, when there is no X-Forwarded-For
        ("10.0.0.2", [], ['for=1.1.1.1, for="[2001:db8::1]:4711";proto=https'], "2001:db8::1"),
        ("10.0.0.2", [], ["for=198.51.100.1:80;by=10.0.0.2"], "198.51.100.1"),
        ("10.0.0.2", [], ["for=unknown"], "10.0.0.2"),
        ("10.0.0.2", [], ["proto=https"], "10.0.0.2"),
        ("10.0.0.2", [], ['for="[2001:db8::1'], "10.0.0.2"),
        ("10.0.0.2", ["198.51.100.7"], ["for=1.1.1.1"], "198.51.100.7"),
        # IPv6 proxies, IPv4 callers through IPv6 sockets
        ("2001:db8:ffff::5", ["::ffff:198.51.100.1"], [], "198.51.100.1"),
        ("::ffff:10.0.0.2", ["198.51.100.1"], [], "198.51.100.1"),
        (None, ["198.51.100.1"], [], None),
    ],
)
def test_the_right_most_untrusted_hop_is_the_caller(
    peer: str | None, xff: list[str], forwarded: list[str], caller: str | None
) -> None:
    assert PROXIES.caller(peer, xff, forwarded) == caller


def test_without_trust_the_peer_is_the_caller() -> None:
    assert ProxyTrust.of(False, ["10.0.0.0/8"]).caller("10.0.0.2", ["1.1.1.1"], []) == "10.0.0.2"


def test_trusting_every_peer_is_refused_at_start() -> None:
    with pytest.raises(SettingsError, match="trust_proxy needs proxy_trusted_servers"):
        load_settings({"trust_proxy": True})
    with pytest.raises(SettingsError, match="not an IP address or CIDR"):
        load_settings({"trust_proxy": True, "proxy_trusted_servers": "10.0.0.0/8,proxy.local"})


async def guesses(client: Any, forwarded_for: str, tries: int) -> list[int]:
    statuses = []
    for _ in range(tries):
        response = await client.post(
            "/api/client/metrics",
            json={"appName": "a"},
            headers={**auth(BAD_KEY), "X-Forwarded-For": forwarded_for},
        )
        statuses.append(response.status)
    return statuses


@pytest.mark.parametrize("mode", ["standalone", "relay"])
async def test_a_spoofed_address_does_not_escape_the_invalid_key_budget(
    make_client: MakeClient, make_relay: MakeClient, mode: str
) -> None:
    """The test's peer (127.0.0.1) is no trusted proxy: each guess names another address,
    and the budget of the real one is spent all the same."""
    make = make_client if mode == "standalone" else make_relay
    client = await make(
        trust_proxy=True,
        proxy_trusted_servers=["10.0.0.0/8"],
        auth_failure_limit=2,
        auth_failure_window=3600,
        **({} if mode == "standalone" else {"client_tokens": []}),
    )
    statuses = [(await guesses(client, f"198.51.100.{n}", 1))[0] for n in range(3)]
    assert statuses == [401, 401, 429]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_behind_a_trusted_proxy_each_caller_has_its_own_budget(
    make_client: MakeClient,
) -> None:
    client = await make_client(
        trust_proxy=True,
        proxy_trusted_servers=["127.0.0.0/8", "::1"],
        auth_failure_limit=2,
        auth_failure_window=3600,
    )
    assert await guesses(client, "198.51.100.1", 3) == [401, 401, 429]
    # another caller behind the same proxy is not held back by the first one's guesses
    assert await guesses(client, "198.51.100.2", 1) == [401]
    # and the first cannot get out by writing another address to the left of its own
    assert await guesses(client, "198.51.100.9, 198.51.100.1", 1) == [429]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_malformed_forwarding_headers_are_never_a_500(make_client: MakeClient) -> None:
    client = await make_client(trust_proxy=True, proxy_trusted_servers=["127.0.0.0/8", "::1"])
    for name, value in [
        ("X-Forwarded-For", ",,,"),
        ("X-Forwarded-For", "[::1"),
        ("X-Forwarded-For", "999.1.1.1"),
        ("X-Forwarded-For", "1.1.1.1%eth0"),
        ("X-Forwarded-For", "a" * 4000),
        ("X-Forwarded-For", ", ".join(["10.0.0.1"] * 500)),
        ("Forwarded", 'for="'),
        ("Forwarded", "for=;for=;;,,="),
        ("Forwarded", "for=[]:80"),
        ("Forwarded", "for=_hidden"),
    ]:
        response = await client.post(
            "/api/client/metrics", json={"appName": "a"}, headers={**auth(BAD_KEY), name: value}
        )
        assert response.status == 401, (name, value, await response.text())
