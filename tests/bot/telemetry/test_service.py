"""bot/telemetry/service.py: the OTLP export opens only with ``tracing.otlp.endpoint`` set."""

from __future__ import annotations

from bot.config import TracingConfig
from bot.telemetry.otlp import OtlpExport
from bot.telemetry.service import Telemetry
from tests.fakes.otlp_collector import FakeCollector


async def test_without_an_endpoint_nothing_is_exported() -> None:
    telemetry = Telemetry(TracingConfig())
    telemetry.start()
    assert telemetry.export is None and telemetry.spans_exported is None
    await telemetry.aclose()


async def test_with_an_endpoint_the_export_opens_and_closes() -> None:
    async with FakeCollector() as collector:
        config = TracingConfig.model_validate({"otlp": {"endpoint": collector.base_url}})
        telemetry = Telemetry(config)
        telemetry.start()
        assert isinstance(telemetry.export, OtlpExport)
        assert telemetry.spans_exported == {"exported": 0, "failed": 0}
        await telemetry.aclose()
        assert telemetry.export is None
