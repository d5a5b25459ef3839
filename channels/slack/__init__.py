"""Slack: slack-bolt's async app over Socket Mode or the HTTP Events API."""

from channels.slack.channel import SlackChannel
from channels.slack.errors import translate_slack_errors
from channels.slack.pacing import PostPacer
from channels.slack.settings import SlackSettings

__all__ = ["PostPacer", "SlackChannel", "SlackSettings", "translate_slack_errors"]
