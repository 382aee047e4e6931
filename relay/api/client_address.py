"""The caller's address: the socket's peer (an IPv4-mapped IPv6 peer as IPv4), unless that
peer is a trusted reverse proxy.

With ``trust_proxy`` on, and only for a peer in ``proxy_trusted_servers`` (IPs and CIDRs),
the address is taken from ``X-Forwarded-For`` (or, when a request has none, RFC 7239
``Forwarded: for=``): read from the right, the hops the trusted proxies appended are
skipped, and the first address that is not a trusted proxy is the caller. Addresses to the
left of it were written by the caller itself and are never used, so a caller reaching the
port directly, or through the proxies, can never choose its address (Edge, and its
``--trust-proxy`` without a list, take the left-most: anyone can). A hop that is not an
address (``unknown``, an obfuscated name, garbage) ends the walk at the last trusted hop,
never an error. ``trust_proxy`` without a list of proxies is a start-up error: trusting
every peer would let every caller choose.

The header read must be one the proxy appends to: X-Forwarded-For is what nginx
(``$proxy_add_x_forwarded_for``), HAProxy, Envoy, Traefik and the cloud load balancers
write; a proxy that writes only ``Forwarded`` must drop an X-Forwarded-For sent by callers
(docs/operations.md, "Behind a reverse proxy").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aiohttp import web

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class ProxyTrust:
    """Which peers may say who the caller is; no networks: none."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def of(cls, enabled: bool, servers: Iterable[str]) -> ProxyTrust:
        if not enabled:
            return cls()
        return cls(tuple(ipaddress.ip_network(s, strict=False) for s in servers))

    def caller(
        self, peer: str | None, forwarded_for: Sequence[str], forwarded: Sequence[str]
    ) -> str | None:
        """The caller's address, given the peer and the request's header lines."""
        address = _address(peer) if self.networks and peer else None
        if address is None or not self._trusted(address):
            return peer
        chain = _x_forwarded_for(forwarded_for) if forwarded_for else _forwarded(forwarded)
        for hop in reversed(chain):
            if hop is None:
                break  # nothing left of a hop that is not an address can be believed
            address = hop
            if not self._trusted(hop):
                break
        return str(address)

    def _trusted(self, address: Address) -> bool:
        return any(address in network for network in self.networks)


PROXY_TRUST = web.AppKey("proxy_trust", ProxyTrust)


def caller_address(request: web.Request) -> str | None:
    """The request's caller (None: a Unix socket, or a peer already gone)."""
    peer = _peer(request.remote)
    trust = request.app.get(PROXY_TRUST)
    if trust is None or not trust.networks:
        return peer
    headers = request.headers
    return trust.caller(
        peer, headers.getall("X-Forwarded-For", []), headers.getall("Forwarded", [])
    )


def _peer(remote: str | None) -> str | None:
    """The socket's peer, an IPv4 caller of a dual-stack socket (workers listening on
    ``::``: ``::ffff:192.0.2.1``) as its IPv4 address, which strategies are written for."""
    if remote is None or not remote.startswith("::ffff:"):
        return remote
    address = _address(remote)
    return remote if address is None else str(address)


def _x_forwarded_for(lines: Sequence[str]) -> list[Address | None]:
    return [_address(hop) for line in lines for hop in line.split(",")]


def _forwarded(lines: Sequence[str]) -> list[Address | None]:
    """``for=`` of each element (``for=1.2.3.4;proto=https, for="[::1]:80"``); an element
    without one is a hop of unknown address."""
    hops: list[Address | None] = []
    for line in lines:
        for element in line.split(","):
            found: Address | None = None
            for pair in element.split(";"):
                name, _, value = pair.partition("=")
                if name.strip().lower() == "for":
                    found = _address(value)
            hops.append(found)
    return hops


def _address(text: str) -> Address | None:
    """An address as proxies write it: bare, quoted, with a port, IPv6 in brackets;
    IPv4-mapped IPv6 as IPv4. None for anything else."""
    value = text.strip().strip('"')
    if value.startswith("["):  # [2001:db8::1]:4711
        value = value[1 : value.find("]")] if "]" in value else ""
    elif value.count(":") == 1:  # 192.0.2.1:4711
        value = value.partition(":")[0]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
