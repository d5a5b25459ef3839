"""``tracing:``, where each run's spans go besides the database (:mod:`bot.telemetry`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator

from bot.config.base import Duration, StrictModel

OTLP_TRACES_PATH = "/v1/traces"


class OtlpConfig(StrictModel):
    endpoint: str = ""
    """The collector's OTLP/HTTP address (``http://collector:4318``); ``/v1/traces`` is added
    unless the URL already ends with it. Empty (the default): nothing is exported, and the
    OpenTelemetry SDK is not even imported."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every export (a hosted collector's API key: ``${OTLP_API_KEY}``); the values
    are masked in logs like every other secret."""
    timeout: Duration = Field(10.0, gt=0)
    """Seconds one export may take, retries included; at shutdown, the most the last export
    may hold the process up."""

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip()
        if not value:
            return ""
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
        return value

    @property
    def traces_url(self) -> str:
        """The URL spans are POSTed to."""
        base = self.endpoint.rstrip("/")
        return base if base.endswith(OTLP_TRACES_PATH) else base + OTLP_TRACES_PATH


class TracingConfig(StrictModel):
    service_name: str = Field("loopgate", min_length=1)
    """``service.name`` of the exported spans: how the collector's UI names this service."""
    otlp: OtlpConfig = Field(default_factory=OtlpConfig)
