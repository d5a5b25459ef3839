"""Slack: slack-bolt's async app over Socket Mode or the HTTP Events API."""

from channels.slack._channel import SlackChannel
from channels.slack._errors import translate_slack_errors
from channels.slack._pacing import PostPacer
from channels.slack._settings import SlackSettings

__all__ = ["PostPacer", "SlackChannel", "SlackSettings", "translate_slack_errors"]
