"""What every dashboard handler shares: the service, the auth state, templates and responses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse

from bot.admin.auth import AdminSessions, LoginLimiter, Session
from bot.admin.runs import RunTracker
from bot.app import Loopgate

NAV = (
    ("runs", "Live runs"),
    ("sessions", "Sessions"),
    ("traces", "Traces"),
    ("channels", "Channels"),
    ("agents", "Agents"),
    ("scheduled", "Scheduled"),
    ("usage", "Usage"),
    ("suggestions", "Suggestions"),
)


@dataclass(frozen=True, slots=True)
class Who:
    """An admitted request: how it was authenticated and, for a session, its CSRF token."""

    how: str  # "bearer" | "session"
    session: Session | None = None
    csrf: str = ""

    @property
    def actor(self) -> str:
        """Recorded as who decided (suggestions) or stopped (runs)."""
        return f"admin ({self.how})"


@dataclass
class Admin:
    loopgate: Loopgate
    sessions: AdminSessions
    limiter: LoginLimiter
    tracker: RunTracker
    templates: Environment = field(
        default_factory=lambda: Environment(
            loader=PackageLoader("bot.admin", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
    )

    def __post_init__(self) -> None:
        self.templates.filters["urlpart"] = lambda value: quote(str(value), safe="")
        self.templates.filters["pretty"] = lambda value: json.dumps(
            value, indent=2, ensure_ascii=False, default=str
        )

    def render(
        self,
        request: Request,
        name: str,
        who: Who | None,
        *,
        status: int = 200,
        **values: Any,
    ) -> HTMLResponse:
        template = self.templates.get_template(name)
        html = template.render(
            prefix=prefix(request),
            csrf=who.csrf if who else "",
            who=who,
            nav=NAV,
            **values,
        )
        return HTMLResponse(html, status_code=status)


def prefix(request: Request) -> str:
    """Where the dashboard is mounted (``/admin``, behind a proxy's root path if any)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


class AdminJSON(JSONResponse):
    """JSON whose datetimes and other odd values are written as strings."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, default=str).encode("utf-8")


def json_response(data: Any, status: int = 200, **headers: str) -> JSONResponse:
    return AdminJSON(data, status_code=status, headers=headers or None)


async def form_fields(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body's fields (first value of each), read once
    per request: the auth check and the handler both look at it."""
    cached: dict[str, str] | None = getattr(request.state, "form_fields", None)
    if cached is None:
        content_type = request.headers.get("content-type", "")
        cached = {}
        if content_type.startswith("application/x-www-form-urlencoded"):
            body = (await request.body()).decode("utf-8", errors="replace")
            cached = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
        request.state.form_fields = cached
    return cached


async def json_body(request: Request) -> dict[str, Any] | None:
    """The request's JSON object, or None when the body is not one."""
    try:
        data = json.loads(await request.body() or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None
