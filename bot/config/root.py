"""config.yaml: loading, ``${VAR}`` interpolation, validation.

Everything an operator can set lives here (the ``channels:`` section in :mod:`bot.config.channels`),
validated once at start-up. A bad value stops the process with a message that names the key path
(``channels.telegram.token: field required``). Secrets can always come from the environment:
``token: ${TELEGRAM_TOKEN}``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

# Sections kept in their own modules are re-exported: ``from bot.config import SlackConfig``.
from bot.config.admin import AdminConfig
from bot.config.agents import AgentConfig as AgentConfig
from bot.config.agents import AgentDefaults as AgentDefaults
from bot.config.agents import AgentsConfig as AgentsConfig
from bot.config.agents import CompactionConfig as CompactionConfig
from bot.config.agents import ContextPruningConfig as ContextPruningConfig
from bot.config.agents import MemoryFlushConfig as MemoryFlushConfig
from bot.config.base import Duration as Duration
from bot.config.base import OffAllowed, StrictModel
from bot.config.channels import ChannelsConfig as ChannelsConfig
from bot.config.channels import SlackConfig as SlackConfig
from bot.config.channels import SlackRateLimit as SlackRateLimit
from bot.config.channels import TelegramConfig as TelegramConfig
from bot.config.channels import TelegramRateLimit as TelegramRateLimit
from bot.config.channels import ZaloConfig as ZaloConfig
from bot.config.cluster import ClusterConfig, RedisConfig, cluster_problems
from bot.config.cron import CronConfig as CronConfig
from bot.config.cron import HeartbeatConfig as HeartbeatConfig
from bot.config.errors import ConfigFileError as ConfigFileError
from bot.config.evolution import EvolutionConfig
from bot.config.media import MediaConfig as MediaConfig
from bot.config.tools import McpConfig, SkillsConfig, ToolsConfig
from bot.config.tracing import TracingConfig as TracingConfig
from bot.config.usage import PricingConfig, UsageConfig

DEFAULT_CONFIG_PATH = Path("config.yaml")
OPENAI_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"


class DatabaseConfig(StrictModel):
    url: str = "sqlite+aiosqlite:///./data/loopgate.db"
    """SQLAlchemy async URL: ``sqlite+aiosqlite:///path`` or ``postgresql+asyncpg://...``."""
    pool_size: int = Field(15, ge=1, le=500)
    """Postgres: connections each process opens at most. They are opened as the load needs
    them and kept (none is closed after a burst to be opened again for the next); a request
    that finds them all busy waits for one. Processes × pool_size must stay below the
    server's ``max_connections`` (100 by default)."""


class ServerConfig(StrictModel):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    """Overridden by the ``PORT`` environment variable (PaaS convention)."""
    max_body_bytes: int = Field(1_048_576, ge=1024)
    """Largest POST body taken; a larger one is answered 413 without reading the rest."""
    max_ws_message_bytes: int = Field(262_144, ge=1024)
    """Largest web chat WebSocket message; a larger one closes the socket (1009)."""
    event_loop: Literal["auto", "uvloop", "asyncio"] = "auto"
    """``loopgate serve``'s event loop: ``auto`` takes uvloop when it is installed (it comes
    with ``uvicorn[standard]``, which would pick it too if it ran the loop itself)."""
    forwarded_allow_ips: str | None = None
    """Addresses whose ``X-Forwarded-Proto``/``-For`` are trusted (comma-separated IPs or
    networks, ``*`` for any): a PaaS's TLS proxy, so that ``https`` is seen as such (the
    dashboard's cookie is ``Secure`` then). Unset: uvicorn's default, ``$FORWARDED_ALLOW_IPS``
    or ``127.0.0.1``."""


class WebConfig(StrictModel):
    """Who may use the web chat (``/`` and ``/ws``)."""

    token: str = ""
    """Required for the web chat when set, and always off loopback (without it the web chat is
    disabled there). Give it as ``Authorization: Bearer``, ``?token=`` or the login form."""
    public: bool = False
    """``true``: anyone may chat anonymously even off loopback (logged as a warning)."""


class SenderRateLimit(StrictModel):
    """Messages one sender may have run per channel: ``burst`` at once, then ``per_minute``."""

    per_minute: float = Field(20.0, gt=0)
    burst: int = Field(5, ge=1)


class ProviderConfig(StrictModel):
    kind: Literal["openai", "anthropic"] = "openai"
    """Wire protocol: ``openai`` (Chat Completions, any compatible server) or ``anthropic``
    (Messages API; ``base_url`` then defaults to https://api.anthropic.com)."""
    base_url: str = OPENAI_BASE_URL
    api_key: str = ""
    model: str = "gpt-4o-mini"
    timeout: float = Field(120.0, gt=0)
    """Seconds to wait for the model (read timeout of one call)."""
    max_tokens: int | None = Field(None, ge=1)
    """Answer length cap; ``anthropic`` requires one and uses 4096 when unset."""
    thinking_budget: int | None = Field(None, ge=1024)
    """``anthropic`` only: enables extended thinking with this many budget tokens."""
    pricing: PricingConfig | None = None
    """USD per million tokens of this provider's models; unset: the genai-prices table
    (docs/usage.md), and a model it doesn't know costs null."""

    @model_validator(mode="after")
    def _kind_defaults(self) -> ProviderConfig:
        if self.kind == "anthropic" and "base_url" not in self.model_fields_set:
            self.base_url = ANTHROPIC_BASE_URL
        return self


class ProvidersConfig(BaseModel):
    """``default`` names the provider agents use; every other key is a provider."""

    model_config = ConfigDict(extra="allow")
    # Extra keys are validated as providers by pydantic itself, so an error's path names the
    # provider (``providers.local.timeout``).
    __pydantic_extra__: dict[str, ProviderConfig] = Field(init=False)
    default: str = "openai"
    openai: ProviderConfig = Field(default_factory=ProviderConfig)

    @model_validator(mode="after")
    def _validate_extra(self) -> ProvidersConfig:
        if self.default not in self.all():
            raise ValueError(f"default provider {self.default!r} is not defined under providers")
        return self

    def all(self) -> dict[str, ProviderConfig]:
        extra: dict[str, ProviderConfig] = dict(self.model_extra or {})
        return {"openai": self.openai, **extra}


class BotConfig(StrictModel):
    """Scheduling and user-facing behaviour shared by every channel."""

    queue_cap: int = Field(10, ge=1)
    dm_concurrency: int = Field(1, ge=1)
    group_concurrency: int = Field(3, ge=1)
    max_concurrent_runs: int = Field(30, ge=1)
    """Runs at once in this process, over all sessions; more wait queued, in order."""
    admins: list[str] = Field(default_factory=list)
    """User ids (``channel:user_id`` or bare ids) allowed to stop anyone's run."""
    error_reply: str = "Sorry, something went wrong while answering. Please try again."
    silent_errors: bool = False
    stop_reply: str = "Stopped."
    nothing_to_stop_reply: str = "Nothing to stop."
    not_allowed_reply: str = "Only the person who asked or an admin can stop this."
    unknown_agent_reply: str = (
        "This chat is linked to an agent that does not exist (any more). "
        "Please tell the bot's operator."
    )
    """Sent (unless ``silent_errors``) when the chat's agent is neither configured nor stored."""
    typing_interval: float = Field(4.0, gt=0)
    typing_ttl: float = Field(120.0, gt=0)
    reactions: bool = True
    reaction_cleanup: Literal["clear", "final"] = "clear"
    sender_rate_limit: Annotated[SenderRateLimit | Literal["off"], OffAllowed] = Field(
        default_factory=SenderRateLimit
    )
    """Per channel and sender; excess messages are not run (one notice per minute). Admins are
    exempt. ``off`` disables it."""
    rate_limited_reply: str = (
        "You're sending messages faster than I can answer, so I skipped some. "
        "Please wait a minute before sending more."
    )
    replay_max_age: Duration = 3600.0
    """Seconds (or ``30m``, ``1h``, ``2d``) a message left unanswered by an earlier process may
    be old and still be run at start-up; older ones end as ``expired``. ``0``: never expire."""
    debounce_ms: int = Field(0, ge=0, le=60_000)
    """Messages of one session arriving within this many milliseconds of each other are
    answered as one turn (commands never merge). 0: off, every message is its own turn."""
    queue_mode: Literal["followup", "collect", "interrupt"] = "collect"
    """Messages that arrive while the session's run is going: ``followup`` (each its own next
    turn), ``collect`` (all of them become one next turn), ``interrupt`` (the running answer is
    stopped and everything is answered in one turn)."""
    shutdown_grace: Duration = 20.0
    """Seconds running answers may finish after SIGTERM (inside a PaaS's 30 s window); what
    still runs then is cancelled and stays in the inbox for the next process."""


class LoggingConfig(StrictModel):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["console", "json"] = "console"


class Config(StrictModel):
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    providers: ProvidersConfig = Field(default_factory=ProvidersConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    bot: BotConfig = Field(default_factory=BotConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    evolution: EvolutionConfig = Field(default_factory=EvolutionConfig)
    admin: AdminConfig = Field(default_factory=AdminConfig)
    redis: RedisConfig = Field(default_factory=RedisConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    cron: CronConfig = Field(default_factory=CronConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    usage: UsageConfig = Field(default_factory=UsageConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)

    def semantic_problems(self) -> list[str]:
        """Checks that span several keys, reported with the key path like schema errors."""
        problems = self.channels.semantic_problems()
        problems += cluster_problems(self.redis.url, self.database.url)
        providers = self.providers.all()
        transcribing = self.media.transcription.provider
        if transcribing is not None and transcribing not in providers:
            problems.append(
                f"media.transcription.provider: unknown provider {transcribing!r} "
                f"(defined: {', '.join(sorted(providers))})"
            )
        # agents.default and channels.<name>.agent may also name agents stored in the database
        # (``loopgate agents set``), unknown here: start-up logs ``agent.unknown`` for those.
        for i, agent in enumerate(self.agents.list):
            for key in ("provider", "fallback_provider"):
                name = getattr(agent, key)
                if name and name not in providers:
                    problems.append(
                        f"agents.list.{i}.{key}: unknown provider {name!r} "
                        f"(defined: {', '.join(sorted(providers))})"
                    )
            if agent.heartbeat is not None:
                problems += self._heartbeat_chat_problems(i, agent.heartbeat.chat)
            for name in agent.mcp_servers or ():
                if name not in self.mcp.servers:
                    problems.append(
                        f"agents.list.{i}.mcp_servers: unknown MCP server {name!r} "
                        f"(defined under mcp.servers: {', '.join(self.mcp.servers) or 'none'})"
                    )
        return problems

    def _heartbeat_chat_problems(self, index: int, chat: str) -> list[str]:
        """A heartbeat speaks in a chat of an enabled channel; otherwise every beat would fail."""
        channel = chat.split(":", 1)[0]
        platforms = {name: getattr(self.channels, name).enabled for name in PLATFORM_CHANNELS}
        if channel == "web" or platforms.get(channel):
            return []
        enabled = ", ".join(["web", *(name for name, on in platforms.items() if on)])
        return [
            f"agents.list.{index}.heartbeat.chat: channel {channel!r} is not enabled "
            f"(enabled: {enabled})"
        ]


PLATFORM_CHANNELS = ("telegram", "slack", "zalo")

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


def interpolate(value: Any, environ: Mapping[str, str], path: str = "") -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in every string of a parsed YAML tree.

    Done after parsing, not on the raw text, so a secret containing ``:`` or ``#`` can't change
    the YAML structure. A ``${VAR}`` without default whose variable is unset is an error.
    """
    if isinstance(value, dict):
        return {
            k: interpolate(v, environ, f"{path}.{k}" if path else str(k)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [interpolate(v, environ, f"{path}.{i}") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ConfigFileError([f"{path}: environment variable {name} is not set"])

    result = _VAR.sub(replace, value)
    # A value that was only "${PORT}" should still validate as an int: YAML-parse scalars.
    if result != value and _VAR.fullmatch(value.strip()):
        try:
            parsed = yaml.safe_load(result) if result else result
        except yaml.YAMLError:
            return result
        if isinstance(parsed, int | float | bool):
            return parsed
    return result


def _format_error(error: Any) -> str:
    loc = ".".join(str(part) for part in error["loc"]) or "(top level)"
    msg = str(error["msg"])
    if error["type"] == "missing":
        msg = "field required"
    elif error["type"] == "extra_forbidden":
        msg = "unknown key"
    elif msg.startswith("Value error, "):
        msg = msg.removeprefix("Value error, ")
    return f"{loc}: {msg[:1].lower()}{msg[1:]}"


def parse_config(
    data: Any, environ: Mapping[str, str] | None = None, *, source: str = ""
) -> Config:
    env = os.environ if environ is None else environ
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigFileError(["(top level): expected a mapping of sections"], source)
    try:
        data = interpolate(data, env)
    except ConfigFileError as exc:
        raise ConfigFileError(exc.problems, source) from None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigFileError([_format_error(e) for e in exc.errors()], source) from None
    problems = config.semantic_problems()
    if problems:
        raise ConfigFileError(problems, source)
    if "PORT" in env:
        try:
            config.server.port = int(env["PORT"])
        except ValueError:
            raise ConfigFileError([f"PORT: not a port number: {env['PORT']!r}"], source) from None
    return config


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read ``path`` (default ``./config.yaml`` when present, else built-in defaults)."""
    if path is None:
        if not DEFAULT_CONFIG_PATH.exists():
            return parse_config({}, environ, source="built-in defaults")
        path = DEFAULT_CONFIG_PATH
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigFileError([f"cannot read file: {exc.strerror}"], str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigFileError([f"not valid YAML: {exc}"], str(path)) from None
    return parse_config(data, environ, source=str(path))
