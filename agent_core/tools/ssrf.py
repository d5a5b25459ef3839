"""The SSRF guard of the web tools: which destinations a URL the model chose may reach.

A destination is refused unless every address its host resolves to is globally routable, judged
by the standard library's :mod:`ipaddress` properties rather than a list of ranges that someone
has to keep complete (198.18.0.0/15 and 100.64.0.0/10 are the ranges hand-written lists forget).
An IPv6 address that carries an IPv4 one (IPv4-mapped, 6to4, Teredo, NAT64) is judged by that
IPv4 address too, because that is where the packets end up. Ports other than 80 and 443 are
refused as well. ``allow_hosts`` (host names, addresses, networks) opens named destinations on
any port: a SearXNG on the LAN, a wiki on the intranet.

The host is resolved once, here, and the caller connects to the addresses returned by
:meth:`WebGuard.check` (web_client.py pins them), so a DNS answer that changes between the check
and the connection can't redirect it. A refusal is a :class:`Refused` tool error whose text
starts with ``refused:`` and names the rule; it never gives the address a name resolved to.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from agent_core.errors import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], Awaitable[list[str]]]
"""host → its addresses (strings); tests inject one so that a name "resolves" to 127.0.0.1."""

SCHEMES = frozenset({"http", "https"})
OPEN_PORTS = frozenset({80, 443})
# NAT64's well-known prefix (RFC 6052): the last 32 bits are the IPv4 address a translator
# connects to. ipaddress has no property for it, unlike ipv4_mapped, sixtofour and teredo.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class Refused(ToolError):
    """A destination the guard closes; the message starts with ``refused:`` and names the rule."""

    def __init__(self, tool: str, rule: str) -> None:
        super().__init__(tool, f"refused: {rule}")


async def system_resolver(host: str) -> list[str]:
    """The system's resolver (getaddrinfo), every address of ``host``, in its order."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, None, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    seen: dict[str, None] = {}
    for *_, sockaddr in infos:
        seen.setdefault(str(sockaddr[0]).split("%", 1)[0], None)  # drop an IPv6 zone id
    return list(seen)


def address_class(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public destination (``"loopback"``, ``"private"``…), None if it is.

    Any address carried inside an IPv6 one is judged as well: ``::ffff:127.0.0.1`` is
    loopback, whatever the IPv6 properties of the outer address say."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        # ::ffff:a.b.c.d is a.b.c.d on a dual-stack socket, whatever ::ffff:0:0/96 is to IPv6.
        return address_class(ip.ipv4_mapped)
    embedded = _embedded_ipv4(ip)
    if embedded is not None and (inner := address_class(embedded)) is not None:
        return inner
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_link_local:  # 169.254.169.254, the cloud metadata service, is here
        return "link-local"
    if ip.is_multicast:  # multicast counts as global for ipaddress: refused all the same
        return "multicast"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "site-local"
    if ip.is_private:  # RFC 1918, 198.18.0.0/15, ULA fc00::/7, documentation ranges, ...
        return "private"
    if ip.is_reserved:
        return "reserved"
    if not ip.is_global:  # 100.64.0.0/10 (CGNAT) is neither private nor global
        return "non-public"
    return None


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # (server, client): the client is where traffic is relayed to
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True, slots=True)
class AllowList:
    """``tools.web.allow_hosts``: host names (exact, any case), addresses and networks."""

    names: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        """Raises ValueError naming a bad entry."""
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip()
            if not entry:
                raise ValueError("an empty entry")
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            if "/" in entry or ":" in entry or " " in entry:
                raise ValueError(f"{raw!r} is neither a host name, an IP address nor a CIDR")
            names.add(normal_host(entry))
        return cls(frozenset(names), tuple(networks))

    def allows_name(self, host: str) -> bool:
        return normal_host(host) in self.names

    def allows_ip(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.networks)

    def __bool__(self) -> bool:
        return bool(self.names or self.networks)


def normal_host(host: str) -> str:
    """Lower case, no brackets nor final dot, international names as IDNA (``xn--``), the form
    a URL's host takes on the wire."""
    host = host.strip().strip("[]").rstrip(".").lower()
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


@dataclass(frozen=True, slots=True)
class Destination:
    """A checked destination: connect to these addresses, in this order, and to no other."""

    host: str
    port: int
    addresses: tuple[str, ...]


class WebGuard:
    """Checks a destination (host, port) and returns the addresses to connect to."""

    def __init__(
        self,
        allow: AllowList | None = None,
        *,
        resolver: Resolver | None = None,
        tool: str = "web_fetch",
    ) -> None:
        self.allow = allow or AllowList()
        self.resolver = resolver or system_resolver
        self.tool = tool

    def with_tool(self, tool: str, *, extra_hosts: Iterable[str] = ()) -> WebGuard:
        """The same guard for another tool's errors, with ``extra_hosts`` (names or addresses)
        opened too."""
        extra = AllowList.parse(extra_hosts)
        allow = AllowList(self.allow.names | extra.names, self.allow.networks + extra.networks)
        return WebGuard(allow, resolver=self.resolver, tool=tool)

    async def check(self, scheme: str, host: str, port: int) -> Destination:
        """Raises :class:`Refused`; a refused destination is never connected to."""
        if scheme not in SCHEMES:
            raise Refused(self.tool, f"scheme {scheme or '(none)'!r}: only http and https")
        host = normal_host(host)
        if not host:
            raise Refused(self.tool, "the URL has no host")
        literal = _literal_ip(host)
        named = literal is None and self.allow.allows_name(host)
        if literal is not None:
            addresses = [literal]
        else:
            addresses = await self._resolve(host)
        for ip in addresses:
            if named or self.allow.allows_ip(ip):
                continue
            if (why := address_class(ip)) is not None:
                # A literal address is the model's own text; a name's addresses stay unsaid,
                # so a refusal can't be used to map a private network's DNS.
                subject = f"{host} is" if literal is not None else f"{host} resolves to"
                article = "an" if why[0] in "aeiou" else "a"
                raise Refused(
                    self.tool,
                    f"{subject} {article} {why} address (not globally routable; "
                    "tools.web.allow_hosts opens a destination)",
                )
            if port not in OPEN_PORTS:
                raise Refused(
                    self.tool,
                    f"port {port}: only 80 and 443 (tools.web.allow_hosts opens other ports)",
                )
        return Destination(host, port, tuple(str(ip) for ip in addresses))

    async def _resolve(self, host: str) -> list[IPAddress]:
        try:
            found = await self.resolver(host)
        except (OSError, UnicodeError) as exc:
            raise ToolError(self.tool, f"could not resolve {host}: {exc}") from exc
        addresses: list[IPAddress] = []
        for text in found:
            try:
                addresses.append(ipaddress.ip_address(text))
            except ValueError:
                continue
        if not addresses:
            raise ToolError(self.tool, f"could not resolve {host}: no address")
        return addresses


def _literal_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
