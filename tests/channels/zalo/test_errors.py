"""channels/zalo/_errors.py: Zalo Bot API failures translated into the channel error tree.

:func:`raise_for_answer` on envelopes (and on real answers of the fake Zalo);
:func:`translate_zalo_errors` on real httpx transport failures.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from channels import BadRequest, ChannelError, Forbidden, RetryAfter
from channels.zalo._errors import (
    DEFAULT_RETRY_AFTER,
    ZaloError,
    ZaloNetworkError,
    ZaloPollIdle,
    ZaloServerError,
    ZaloTokenInvalid,
    raise_for_answer,
    translate_zalo_errors,
)
from tests.fakes.zalo_server import DEFAULT_TOKEN, FakeZalo
from tests.service_support import free_port


def envelope(code: int | None, description: str = "nope") -> dict[str, Any]:
    body: dict[str, Any] = {"ok": False, "description": description}
    if code is not None:
        body["error_code"] = code
    return body


def test_the_error_tree() -> None:
    assert issubclass(ZaloTokenInvalid, Forbidden)
    for cls in (ZaloPollIdle, ZaloServerError, ZaloNetworkError):
        assert issubclass(cls, ZaloError) and issubclass(cls, ChannelError)


class TestRaiseForAnswer:
    def test_an_ok_envelope_is_returned(self) -> None:
        body = {"ok": True, "result": {"message_id": "m"}}
        assert raise_for_answer("sendMessage", 200, body, {}) is body

    def test_ok_must_be_true_itself(self) -> None:
        with pytest.raises(ZaloError, match="answer is not a JSON envelope"):
            raise_for_answer("getMe", 200, "not json", {})
        with pytest.raises(BadRequest):
            raise_for_answer("getMe", 200, {"ok": "yes"}, {})

    @pytest.mark.parametrize(
        ("status", "code", "error"),
        [
            (408, 408, ZaloPollIdle),
            (200, 408, ZaloPollIdle),
            (408, None, ZaloPollIdle),
            (401, 401, ZaloTokenInvalid),
            (200, 401, ZaloTokenInvalid),
            (401, None, ZaloTokenInvalid),
            (200, 403, Forbidden),
            (400, 400, BadRequest),
            (404, 404, BadRequest),
            (200, 0, BadRequest),
            (500, None, ZaloServerError),
            (200, 502, ZaloServerError),
        ],
    )
    def test_the_code_picks_the_error(
        self, status: int, code: int | None, error: type[Exception]
    ) -> None:
        with pytest.raises(error) as raised:
            raise_for_answer("sendMessage", status, envelope(code), {})
        assert type(raised.value) is error

    def test_the_body_code_wins_over_the_status(self) -> None:
        with pytest.raises(Forbidden) as raised:
            raise_for_answer("sendMessage", 400, envelope(403), {})
        assert not isinstance(raised.value, ZaloTokenInvalid)
        with pytest.raises(BadRequest):
            raise_for_answer("sendMessage", 403, envelope(400), {})

    def test_a_refusing_status_counts_whatever_the_body_says(self) -> None:
        with pytest.raises(ZaloTokenInvalid):
            raise_for_answer("sendMessage", 401, envelope(400), {})
        with pytest.raises(RetryAfter):
            raise_for_answer("sendMessage", 429, envelope(400), {})
        with pytest.raises(ZaloServerError) as raised:
            raise_for_answer("sendMessage", 503, envelope(400), {})
        assert raised.value.status == 503

    def test_the_message_says_what_failed_without_the_url(self) -> None:
        with pytest.raises(BadRequest) as raised:
            raise_for_answer("sendMessage", 400, envelope(400, "x" * 500), {})
        text = str(raised.value)
        assert text.startswith("Zalo sendMessage failed: " + "x" * 200 + " (HTTP 400")
        assert "x" * 201 not in text and "error_code 400" in text

    def test_without_description_the_status_is_named(self) -> None:
        with pytest.raises(BadRequest, match=r"failed: HTTP 400 \(HTTP 400, error_code None\)"):
            raise_for_answer("sendMessage", 400, {"ok": False}, {})

    def test_server_error_status_and_processing(self) -> None:
        with pytest.raises(ZaloServerError) as raised:
            raise_for_answer("sendMessage", 503, envelope(503), {})
        assert raised.value.status == 503 and raised.value.not_processed
        with pytest.raises(ZaloServerError) as raised:
            raise_for_answer("sendMessage", 500, envelope(None), {})
        assert raised.value.status == 500 and not raised.value.not_processed
        with pytest.raises(ZaloServerError) as raised:
            raise_for_answer("sendMessage", 200, envelope(504), {})
        assert raised.value.status == 504 and raised.value.error_code == 504
        assert raised.value.not_processed

    @pytest.mark.parametrize(
        ("body", "headers", "delay"),
        [
            (envelope(429), {"retry-after": "7"}, 7.0),
            ({**envelope(429), "parameters": {"retry_after": 4}}, {}, 4.0),
            ({**envelope(429), "parameters": {"retry_after": 4}}, {"retry-after": "2.5"}, 2.5),
            ({**envelope(429), "parameters": {"retry_after": 4}}, {"retry-after": "soon"}, 4.0),
            (envelope(429), {"retry-after": "-3"}, 0.0),
            (envelope(429), {}, DEFAULT_RETRY_AFTER),
            ({**envelope(429), "parameters": "x"}, {}, DEFAULT_RETRY_AFTER),
        ],
    )
    def test_rate_limit_delay(
        self, body: dict[str, Any], headers: dict[str, str], delay: float
    ) -> None:
        with pytest.raises(RetryAfter) as raised:
            raise_for_answer("sendMessage", 429, body, headers)
        assert raised.value.retry_after == delay

    def test_a_non_numeric_error_code_falls_back_to_the_status(self) -> None:
        with pytest.raises(ZaloTokenInvalid):
            raise_for_answer("getMe", 401, envelope(None) | {"error_code": "bad"}, {})


class TestRealAnswers:
    """Answers of the fake Zalo over real HTTP, through ``raise_for_answer``."""

    async def call(self, zalo: FakeZalo, method: str, token: str = DEFAULT_TOKEN) -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.post(f"{zalo.base_url}/bot{token}/{method}", json={})
        return raise_for_answer(method, response.status_code, response.json(), response.headers)

    async def test_ok(self, zalo: FakeZalo) -> None:
        assert (await self.call(zalo, "getMe"))["result"]["id"] == "bot-1"

    async def test_wrong_token(self, zalo: FakeZalo) -> None:
        with pytest.raises(ZaloTokenInvalid):
            await self.call(zalo, "getMe", token="wrong")

    async def test_rate_limited_with_retry_after_header(self, zalo: FakeZalo) -> None:
        zalo.fail("getMe", 429, retry_after=3)
        with pytest.raises(RetryAfter) as raised:
            await self.call(zalo, "getMe")
        assert raised.value.retry_after == 3.0

    async def test_server_error(self, zalo: FakeZalo) -> None:
        zalo.fail("getMe", 502)
        with pytest.raises(ZaloServerError) as raised:
            await self.call(zalo, "getMe")
        assert raised.value.not_processed

    async def test_idle_poll(self, zalo: FakeZalo) -> None:
        with pytest.raises(ZaloPollIdle):
            await self.call(zalo, "getUpdates")

    async def test_unknown_method(self, zalo: FakeZalo) -> None:
        with pytest.raises(BadRequest):
            await self.call(zalo, "noSuchMethod")


class TestTranslate:
    async def test_a_refused_connection_was_not_sent(self) -> None:
        url = f"http://127.0.0.1:{free_port()}/botSECRET/sendMessage"
        with pytest.raises(ZaloNetworkError) as raised, translate_zalo_errors("sendMessage"):
            async with httpx.AsyncClient(timeout=5) as client:
                await client.post(url, json={})
        assert raised.value.request_sent is False
        assert str(raised.value) == "Zalo sendMessage: network error (ConnectError)"
        assert isinstance(raised.value.__cause__, httpx.ConnectError)

    async def test_a_read_timeout_may_have_been_acted_on(self) -> None:
        async with FakeZalo(idle_wait=10) as zalo:
            url = f"{zalo.base_url}/bot{zalo.token}/getUpdates"
            with pytest.raises(ZaloNetworkError) as raised, translate_zalo_errors("getUpdates"):
                async with httpx.AsyncClient(timeout=0.2) as client:
                    await client.post(url, json={"timeout": 30})
        assert raised.value.request_sent is True
        assert "ReadTimeout" in str(raised.value) and zalo.token not in str(raised.value)

    def test_other_errors_pass_through(self) -> None:
        with pytest.raises(ValueError), translate_zalo_errors("getMe"):
            raise ValueError("not a transport failure")
