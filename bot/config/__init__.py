"""Configuration: every model an operator can set in ``config.yaml``, validated at start-up.

The bottom of ``bot``: nothing here imports another ``bot`` package (an import-linter contract
in ``pyproject.toml`` holds it). One module per section: :mod:`.base` (the strict base model and
shared field types), :mod:`.agents`, :mod:`.channels`, :mod:`.tools`, :mod:`.admin`,
:mod:`.cluster`, :mod:`.evolution`, :mod:`.tracing`; :mod:`.root` holds the root
:class:`Config`, the smaller sections and the loader (``${VAR}`` interpolation, errors that
name the key path).
"""

from bot.config.admin import AdminConfig
from bot.config.agents import (
    AgentConfig,
    AgentDefaults,
    AgentsConfig,
    CompactionConfig,
    ContextPruningConfig,
    MemoryFlushConfig,
)
from bot.config.base import Duration
from bot.config.channels import (
    ChannelsConfig,
    SlackConfig,
    SlackRateLimit,
    TelegramConfig,
    TelegramRateLimit,
    ZaloConfig,
)
from bot.config.cluster import ClusterConfig, RedisConfig
from bot.config.cron import CronConfig, HeartbeatConfig
from bot.config.errors import ConfigFileError
from bot.config.evolution import EvolutionConfig
from bot.config.media import MediaConfig
from bot.config.root import (
    ANTHROPIC_BASE_URL,
    DEFAULT_CONFIG_PATH,
    OPENAI_BASE_URL,
    BotConfig,
    Config,
    DatabaseConfig,
    LoggingConfig,
    ProviderConfig,
    ProvidersConfig,
    SenderRateLimit,
    ServerConfig,
    WebConfig,
    interpolate,
    load_config,
    parse_config,
)
from bot.config.tools import McpConfig, SkillsConfig
from bot.config.tracing import OtlpConfig, TracingConfig
from bot.config.usage import BudgetConfig, PricingConfig, UsageConfig

__all__ = [
    "ANTHROPIC_BASE_URL",
    "DEFAULT_CONFIG_PATH",
    "OPENAI_BASE_URL",
    "AdminConfig",
    "AgentConfig",
    "AgentDefaults",
    "AgentsConfig",
    "BotConfig",
    "BudgetConfig",
    "ChannelsConfig",
    "ClusterConfig",
    "CompactionConfig",
    "Config",
    "ConfigFileError",
    "ContextPruningConfig",
    "CronConfig",
    "DatabaseConfig",
    "Duration",
    "EvolutionConfig",
    "HeartbeatConfig",
    "LoggingConfig",
    "McpConfig",
    "MediaConfig",
    "MemoryFlushConfig",
    "OtlpConfig",
    "PricingConfig",
    "ProviderConfig",
    "ProvidersConfig",
    "RedisConfig",
    "SenderRateLimit",
    "ServerConfig",
    "SkillsConfig",
    "SlackConfig",
    "SlackRateLimit",
    "TelegramConfig",
    "TelegramRateLimit",
    "TracingConfig",
    "UsageConfig",
    "WebConfig",
    "ZaloConfig",
    "interpolate",
    "load_config",
    "parse_config",
]
