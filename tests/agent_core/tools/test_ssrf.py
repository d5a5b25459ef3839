"""The SSRF guard: every address that is not globally routable is refused, by rule, without
saying what a name resolved to; allow_hosts opens named destinations on any port."""

from __future__ import annotations

import ipaddress

import pytest

from agent_core.errors import ToolError
from agent_core.tools.ssrf import AllowList, Refused, WebGuard, address_class
from tests.web_support import FakeDNS

# (address, the class the refusal names): every range the issue lists, and the ones hand-written
# lists forget.
GUARDED = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.5.4", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "non-public"),  # CGNAT, RFC 6598
    ("100.127.255.254", "non-public"),
    ("169.254.169.254", "link-local"),  # cloud metadata
    ("169.254.0.1", "link-local"),
    ("198.18.0.1", "private"),  # benchmarking, RFC 2544
    ("198.19.255.254", "private"),
    ("0.0.0.0", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("255.255.255.255", "private"),
    ("192.0.2.10", "private"),  # documentation
    ("240.0.0.1", "private"),  # reserved, future use
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fc00::1", "private"),  # ULA
    ("fd12:3456::1", "private"),
    ("fe80::1", "link-local"),
    ("ff02::1", "multicast"),
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
    ("::ffff:10.1.2.3", "private"),
    ("::ffff:169.254.169.254", "link-local"),
    ("2002:7f00:1::", "loopback"),  # 6to4 around 127.0.0.1
    ("2002:a00:1::", "private"),  # 6to4 around 10.0.0.1
    ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 around 169.254.169.254
    ("2001:db8::1", "private"),  # documentation
]

PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


@pytest.mark.parametrize(("address", "why"), GUARDED)
def test_every_guarded_range_has_its_class(address: str, why: str) -> None:
    assert address_class(ipaddress.ip_address(address)) == why


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert address_class(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(("address", "why"), GUARDED)
async def test_a_literal_guarded_address_is_refused_by_rule(address: str, why: str) -> None:
    dns = FakeDNS()
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(Refused) as refused:
        await WebGuard(resolver=dns).check("http", host, 80)
    assert str(refused.value).startswith(f"refused: {address} is a")
    assert why in str(refused.value)
    assert dns.lookups == []  # a literal address is never looked up


@pytest.mark.parametrize(("address", "why"), GUARDED)
async def test_a_name_resolving_to_a_guarded_address_is_refused_without_saying_it(
    address: str, why: str
) -> None:
    dns = FakeDNS({"innocent.example": [address]})
    with pytest.raises(Refused) as refused:
        await WebGuard(resolver=dns).check("https", "innocent.example", 443)
    message = str(refused.value)
    assert message.startswith("refused: innocent.example resolves to a")
    assert why in message
    assert address not in message  # what the name resolved to stays unsaid


async def test_one_guarded_address_among_public_ones_refuses_the_name() -> None:
    dns = FakeDNS({"mixed.example": ["93.184.215.14", "127.0.0.1"]})
    with pytest.raises(Refused, match="loopback"):
        await WebGuard(resolver=dns).check("https", "mixed.example", 443)


async def test_a_public_name_returns_its_checked_addresses_after_one_lookup() -> None:
    dns = FakeDNS({"example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]})
    destination = await WebGuard(resolver=dns).check("https", "Example.COM.", 443)
    assert destination.addresses == ("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    assert destination.host == "example.com"
    assert dns.lookups == ["example.com"]


class TestPortsAndSchemes:
    @pytest.mark.parametrize("port", [22, 25, 6379, 8080, 8443])
    async def test_other_ports_are_refused_on_public_hosts(self, port: int) -> None:
        dns = FakeDNS({"example.com": ["93.184.215.14"]})
        with pytest.raises(Refused, match=rf"^refused: port {port}: only 80 and 443"):
            await WebGuard(resolver=dns).check("http", "example.com", port)

    @pytest.mark.parametrize("scheme", ["ftp", "file", "gopher", ""])
    async def test_only_http_and_https(self, scheme: str) -> None:
        with pytest.raises(Refused, match=r"^refused: scheme .*only http and https"):
            await WebGuard(resolver=FakeDNS()).check(scheme, "example.com", 80)


class TestAllowHosts:
    async def test_a_named_host_opens_any_address_and_port(self) -> None:
        dns = FakeDNS({"searx.lan": ["192.168.1.20"]})
        guard = WebGuard(AllowList.parse(["searx.lan"]), resolver=dns)
        destination = await guard.check("http", "SEARX.lan", 8888)
        assert destination.addresses == ("192.168.1.20",)

    async def test_a_cidr_opens_the_addresses_inside_it_only(self) -> None:
        dns = FakeDNS({"wiki.lan": ["10.1.2.3"], "db.lan": ["10.9.0.1"]})
        guard = WebGuard(AllowList.parse(["10.1.0.0/16"]), resolver=dns)
        assert (await guard.check("http", "wiki.lan", 3000)).addresses == ("10.1.2.3",)
        with pytest.raises(Refused, match="private"):
            await guard.check("http", "db.lan", 80)

    async def test_an_address_opens_itself_given_literally(self) -> None:
        guard = WebGuard(AllowList.parse(["127.0.0.1"]), resolver=FakeDNS())
        assert (await guard.check("http", "127.0.0.1", 9999)).addresses == ("127.0.0.1",)
        with pytest.raises(Refused):
            await guard.check("http", "127.0.0.2", 80)

    async def test_a_name_is_not_opened_by_another_name_on_the_same_address(self) -> None:
        dns = FakeDNS({"searx.lan": ["192.168.1.20"], "router.lan": ["192.168.1.20"]})
        guard = WebGuard(AllowList.parse(["searx.lan"]), resolver=dns)
        with pytest.raises(Refused, match="private"):
            await guard.check("http", "router.lan", 80)

    async def test_an_international_name_matches_its_wire_form(self) -> None:
        dns = FakeDNS({"xn--bcher-kva.lan": ["192.168.1.30"]})
        guard = WebGuard(AllowList.parse(["Bücher.lan"]), resolver=dns)
        assert (await guard.check("http", "xn--bcher-kva.lan", 80)).addresses == ("192.168.1.30",)

    async def test_an_ipv6_network(self) -> None:
        guard = WebGuard(AllowList.parse(["fd00::/8"]), resolver=FakeDNS())
        assert (await guard.check("http", "[fd00::5]", 8080)).addresses == ("fd00::5",)

    @pytest.mark.parametrize("entry", ["", "http://searx.lan", "10.0.0.0/33", "a b"])
    def test_a_bad_entry_is_named(self, entry: str) -> None:
        with pytest.raises(ValueError):
            AllowList.parse([entry])


async def test_a_name_that_does_not_resolve_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match=r"could not resolve nowhere\.invalid") as error:
        await WebGuard(resolver=FakeDNS()).check("https", "nowhere.invalid", 443)
    assert not isinstance(error.value, Refused)


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "127.1", "0177.0.0.1", "localhost"])
async def test_numeric_forms_and_localhost_through_the_system_resolver(host: str) -> None:
    # What the system's getaddrinfo makes of these (no network needed) is what is judged.
    with pytest.raises(Refused, match=rf"^refused: {host} resolves to a loopback address"):
        await WebGuard().check("http", host, 80)
