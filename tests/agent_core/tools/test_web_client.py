"""The guarded client against real HTTP(S) servers on loopback: pinned to the checked address,
redirects checked hop by hop, the size and time caps."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator

import pytest
import trustme

from agent_core.errors import ToolError
from agent_core.tools.ssrf import Refused
from agent_core.tools.web_client import WebLimits
from tests.fakes.web_server import FakeWeb
from tests.web_support import FakeDNS, guarded_client


@pytest.fixture
async def web() -> AsyncIterator[FakeWeb]:
    async with FakeWeb() as server:
        yield server


@pytest.fixture
async def internal() -> AsyncIterator[FakeWeb]:
    """A second server: stands for a private service nobody opened."""
    async with FakeWeb() as server:
        server.page("/secret", "the admin password is hunter2", "text/plain")
        yield server


class TestPinning:
    async def test_the_name_is_resolved_once_and_the_request_speaks_for_it(
        self, web: FakeWeb
    ) -> None:
        web.page("/", "hello", "text/plain")
        # A rebinding DNS: the first answer is the allowed address, any later one elsewhere.
        # ".test" names don't resolve on this machine: httpx's own lookup would fail too.
        dns = FakeDNS({"site.test": [["127.0.0.1"], ["10.0.0.1"]]})
        client = guarded_client(dns, ["127.0.0.1"])
        fetched = await client.request("GET", web.url("/", "site.test"))
        await client.aclose()
        assert fetched.status == 200 and fetched.body == b"hello"
        assert dns.lookups == ["site.test"]
        assert web.requests[0].host == f"site.test:{web.port}"

    async def test_a_name_resolving_to_loopback_is_refused_unless_allowed(
        self, web: FakeWeb
    ) -> None:
        web.page("/", "hello", "text/plain")
        dns = FakeDNS({"local.test": ["127.0.0.1"]})
        client = guarded_client(dns)
        with pytest.raises(Refused, match=r"^refused: local\.test resolves to a loopback"):
            await client.request("GET", web.url("/", "local.test"))
        assert web.requests == []  # no connection at all
        opened = guarded_client(dns, ["local.test"])
        assert (await opened.request("GET", web.url("/", "local.test"))).body == b"hello"
        await client.aclose()
        await opened.aclose()


class TestRedirects:
    async def test_a_chain_is_followed_each_hop_checked(self, web: FakeWeb) -> None:
        web.redirect("/start", "/middle", 301)
        web.redirect("/middle", web.url("/last", "www.site.test"), 302)
        web.redirect("/last", "/final?x=1", 307)
        web.page("/final", "arrived", "text/plain")
        dns = FakeDNS({"site.test": ["127.0.0.1"], "www.site.test": ["127.0.0.1"]})
        client = guarded_client(dns, ["127.0.0.0/8"])
        fetched = await client.request("GET", web.url("/start", "site.test"))
        await client.aclose()
        assert fetched.body == b"arrived" and fetched.redirects == 3
        assert fetched.url == web.url("/final?x=1", "www.site.test")
        assert [r.path for r in web.requests] == ["/start", "/middle", "/last", "/final"]
        assert dns.lookups == ["site.test", "site.test", "www.site.test", "www.site.test"]

    async def test_a_redirect_into_a_private_address_is_refused(
        self, web: FakeWeb, internal: FakeWeb
    ) -> None:
        web.redirect("/go", internal.url("/secret"))
        dns = FakeDNS({"public.test": ["127.0.0.1"]})
        client = guarded_client(dns, ["public.test"])  # the name only, not its address
        with pytest.raises(Refused) as refused:
            await client.request("GET", web.url("/go", "public.test"))
        await client.aclose()
        assert str(refused.value).startswith("refused: 127.0.0.1 is a loopback address")
        assert "hunter2" not in str(refused.value)
        assert internal.requests == []  # the refused destination got no connection

    async def test_a_redirect_to_a_name_resolving_privately_is_refused(
        self, web: FakeWeb, internal: FakeWeb
    ) -> None:
        web.redirect("/go", internal.url("/secret", "metadata.test"))
        dns = FakeDNS({"public.test": ["127.0.0.1"], "metadata.test": ["169.254.169.254"]})
        client = guarded_client(dns, ["public.test"])
        with pytest.raises(Refused, match=r"^refused: metadata\.test resolves to a link-local"):
            await client.request("GET", web.url("/go", "public.test"))
        await client.aclose()
        assert internal.requests == []

    async def test_a_redirect_to_another_scheme_is_refused(self, web: FakeWeb) -> None:
        web.redirect("/go", "file:///etc/passwd")
        client = guarded_client(FakeDNS(), ["127.0.0.1"])
        with pytest.raises(Refused, match=r"^refused: scheme 'file'"):
            await client.request("GET", web.url("/go"))
        await client.aclose()

    async def test_more_than_five_redirects_is_an_error(self, web: FakeWeb) -> None:
        for i in range(7):
            web.redirect(f"/r{i}", f"/r{i + 1}")
        web.page("/r7", "end", "text/plain")
        client = guarded_client(FakeDNS(), ["127.0.0.1"])
        with pytest.raises(ToolError, match="more than 5 redirects"):
            await client.request("GET", web.url("/r0"))
        await client.aclose()
        assert len(web.requests) == 6  # the first answer and its five redirects

    async def test_five_redirects_are_followed(self, web: FakeWeb) -> None:
        for i in range(5):
            web.redirect(f"/r{i}", f"/r{i + 1}")
        web.page("/r5", "end", "text/plain")
        client = guarded_client(FakeDNS(), ["127.0.0.1"])
        assert (await client.request("GET", web.url("/r0"))).body == b"end"
        await client.aclose()


class TestCaps:
    async def test_the_body_stops_at_max_bytes(self, web: FakeWeb) -> None:
        web.page("/big", b"", "text/plain", endless=True)
        client = guarded_client(FakeDNS(), ["127.0.0.1"], limits=WebLimits(max_bytes=100_000))
        fetched = await client.request("GET", web.url("/big"))
        await client.aclose()
        assert fetched.truncated and len(fetched.body) == 100_000

    async def test_a_body_within_max_bytes_is_whole(self, web: FakeWeb) -> None:
        web.page("/small", b"y" * 99_999, "text/plain")
        client = guarded_client(FakeDNS(), ["127.0.0.1"], limits=WebLimits(max_bytes=100_000))
        fetched = await client.request("GET", web.url("/small"))
        await client.aclose()
        assert not fetched.truncated and len(fetched.body) == 99_999

    async def test_a_stalled_answer_ends_at_the_timeout(self, web: FakeWeb) -> None:
        web.page("/slow", b"", "text/plain", stall=True)
        client = guarded_client(FakeDNS(), ["127.0.0.1"], limits=WebLimits(timeout=0.3))
        with pytest.raises(ToolError, match=r"no complete answer within 0\.3 s"):
            await client.request("GET", web.url("/slow"))
        await client.aclose()

    async def test_an_unreachable_port_is_a_tool_error(self) -> None:
        client = guarded_client(FakeDNS(), ["127.0.0.1"])
        with pytest.raises(ToolError, match="could not connect"):
            await client.request("GET", "http://127.0.0.1:1/")
        await client.aclose()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def trust(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def _tls_files(ca: trustme.CA, name: str) -> Iterator[tuple[str, str]]:
    cert = ca.issue_cert(name)
    with cert.private_key_and_cert_chain_pem.tempfile() as both:
        yield both, both


class TestTls:
    async def test_the_certificate_is_verified_against_the_name_not_the_address(
        self, ca: trustme.CA, trust: ssl.SSLContext
    ) -> None:
        for pem, _ in _tls_files(ca, "secure.test"):
            async with FakeWeb(certfile=pem, keyfile=pem) as web:
                web.page("/", "over tls", "text/plain")
                dns = FakeDNS({"secure.test": ["127.0.0.1"]})
                client = guarded_client(dns, ["secure.test"], verify=trust)
                fetched = await client.request("GET", web.url("/", "secure.test"))
                await client.aclose()
                assert fetched.body == b"over tls"
                assert web.requests[0].host == f"secure.test:{web.port}"

    async def test_a_certificate_for_another_name_fails(
        self, ca: trustme.CA, trust: ssl.SSLContext
    ) -> None:
        for pem, _ in _tls_files(ca, "other.test"):
            async with FakeWeb(certfile=pem, keyfile=pem) as web:
                web.page("/", "over tls", "text/plain")
                dns = FakeDNS({"secure.test": ["127.0.0.1"]})
                client = guarded_client(dns, ["secure.test"], verify=trust)
                with pytest.raises(ToolError, match=r"(?i)certificate"):
                    await client.request("GET", web.url("/", "secure.test"))
                await client.aclose()
                assert web.requests == []
