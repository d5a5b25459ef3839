"""The dashboard's HTML pages: server-rendered tables and forms (templates in ``templates/``).

Every form posts back here with the session's CSRF token and is answered with a redirect to
the page it came from (post/redirect/get), with a short notice in the query string.
"""

from __future__ import annotations

from importlib import resources
from urllib.parse import quote, urlencode

import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from bot.admin import agent_edit, queries, scheduled, suggestions, usage
from bot.admin.context import Admin, Who, form_fields, json_response, prefix
from bot.admin.gate import Handler, guard, is_api, logout
from bot.config.agents import SETTABLE
from bot.storage.usage import DIMENSIONS
from bot.usage.report import BadPeriod

log = structlog.get_logger(__name__)

STATIC_TYPES = {
    "admin.js": "text/javascript",
    "admin.css": "text/css",
    "usage.js": "text/javascript",
    "uPlot.iife.min.js": "text/javascript",  # uplot 1.6.32 from npm (bot/admin/usage.py)
    "uPlot.min.css": "text/css",
}


def _back(request: Request, path: str, **notice: str) -> Response:
    query = f"?{urlencode(notice)}" if notice else ""
    return RedirectResponse(f"{prefix(request)}{path}{query}", 303)


def page_routes(admin: Admin) -> list[BaseRoute]:
    loopgate = admin.loopgate

    def notice(request: Request) -> dict[str, str]:
        params = request.query_params
        return {k: params[k][:300] for k in ("ok", "error") if params.get(k)}

    async def runs(request: Request, who: Who) -> Response:
        return admin.render(
            request, "runs.html", who, runs=admin.tracker.runs(), notice=notice(request)
        )

    async def stop_run(request: Request, who: Who) -> Response:
        run_id = request.path_params["run_id"]
        if await admin.tracker.stop(run_id, by=who.actor):
            return _back(request, "/runs", ok=f"Run {run_id} stopped.")
        return _back(request, "/runs", error=f"Run {run_id} is not running (any more).")

    async def sessions(request: Request, who: Who) -> Response:
        found = await queries.sessions(loopgate, limit=queries.clamp(None, 100))
        return admin.render(request, "sessions.html", who, sessions=found)

    async def session(request: Request, who: Who) -> Response:
        key = request.path_params["key"]
        found = await queries.session_messages(loopgate, key)
        if found is None:
            return admin.render(request, "error.html", who, status=404, message="No such session.")
        traces = await queries.recent_traces(loopgate, last=20, session=key)
        return admin.render(request, "session.html", who, session=found, traces=traces)

    async def traces(request: Request, who: Who) -> Response:
        last = queries.clamp(request.query_params.get("last"), 30)
        found = await queries.recent_traces(loopgate, last=last)
        return admin.render(request, "traces.html", who, traces=found)

    async def trace(request: Request, who: Who) -> Response:
        found = await queries.trace_tree(loopgate, request.path_params["trace_id"])
        if found is None:
            message = "No trace for this run (yet): a run's trace is saved when it ends."
            return admin.render(request, "error.html", who, status=404, message=message)
        return admin.render(request, "trace.html", who, trace=found)

    async def channels(request: Request, who: Who) -> Response:
        report = await queries.channels(loopgate)
        return admin.render(request, "channels.html", who, **report)

    async def agents(request: Request, who: Who) -> Response:
        if opened := request.query_params.get("open", "").strip():
            return _back(request, f"/agents/{quote(opened, safe='')}")
        found = await agent_edit.list_agents(loopgate)
        return admin.render(request, "agents.html", who, agents=found, notice=notice(request))

    async def agent(request: Request, who: Who) -> Response:
        agent_id = request.path_params["agent_id"]
        problems: dict[str, str] = {}
        if request.method == "POST":
            fields = await form_fields(request)
            raw = {name: fields.get(name, "") for name in SETTABLE}
            try:
                await agent_edit.save_agent(loopgate, agent_id, agent_edit.parse_changes(raw))
                return _back(request, f"/agents/{quote(agent_id, safe='')}", ok="Saved.")
            except agent_edit.AgentEditError as exc:
                problems = exc.problems
        found = await agent_edit.get_agent(loopgate, agent_id)
        return admin.render(
            request,
            "agent.html",
            who,
            status=400 if problems else 200,
            agent_id=agent_id,
            agent=found,
            problems=problems,
            providers=agent_edit.providers(loopgate),
            notice=notice(request),
        )

    async def delete_agent(request: Request, who: Who) -> Response:
        agent_id = request.path_params["agent_id"]
        if await agent_edit.delete_agent(loopgate, agent_id):
            return _back(request, "/agents", ok=f"Stored agent {agent_id} deleted.")
        return _back(request, "/agents", error=f"No stored agent {agent_id}.")

    async def scheduled_jobs(request: Request, who: Who) -> Response:
        jobs = await scheduled.list_jobs(loopgate)
        return admin.render(request, "scheduled.html", who, jobs=jobs, notice=notice(request))

    async def usage_page(request: Request, who: Who) -> Response:
        since, by = request.query_params.get("since"), request.query_params.get("by")
        try:
            report = await usage.report(loopgate, since, by)
            problem = None
        except BadPeriod as exc:
            report, problem = await usage.report(loopgate, None, None), str(exc)
        return admin.render(
            request,
            "usage.html",
            who,
            status=400 if problem else 200,
            report=report,
            dimensions=DIMENSIONS,
            notice={"error": problem} if problem else notice(request),
        )

    def job_action(action: str) -> Handler:
        async def act(request: Request, who: Who) -> Response:
            job_id = request.path_params["job_id"]
            if action == "remove":
                done = await scheduled.remove(loopgate, job_id)
            else:
                done = await scheduled.pause(loopgate, job_id, paused=action == "pause")
            if not done:
                return _back(request, "/scheduled", error=f"No scheduled job {job_id}.")
            verb = {"pause": "paused", "resume": "resumed", "remove": "removed"}[action]
            log.info("admin.cron_job", action=action, job=job_id, by=who.actor)
            return _back(request, "/scheduled", ok=f"Job {job_id} {verb}.")

        return act

    async def suggestion_list(request: Request, who: Who) -> Response:
        try:
            status = suggestions.parse_status(request.query_params.get("status", "all"))
        except ValueError:
            status = None
        return admin.render(
            request,
            "suggestions.html",
            who,
            suggestions=await suggestions.list_suggestions(loopgate, status=status),
            metrics=await suggestions.metrics(loopgate),
            selected=status.value if status else "all",
            notice=notice(request),
        )

    def decision(approve: bool) -> Handler:
        async def decide(request: Request, who: Who) -> Response:
            suggestion_id = request.path_params["id"]
            reason = (await form_fields(request)).get("reason", "")[:1000]
            try:
                decided = await suggestions.decide(
                    loopgate, suggestion_id, approve=approve, by=who.actor, reason=reason
                )
            except ValueError as exc:
                return _back(request, "/suggestions", error=str(exc))
            if decided is None:
                return _back(request, "/suggestions", error=f"No suggestion {suggestion_id}.")
            verb = "approved" if approve else "rejected"
            state = decided["status"].replace("_", " ")
            return _back(request, "/suggestions", ok=f"Suggestion {verb}: now {state}.")

        return decide

    async def static(request: Request, who: Who) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_TYPES:
            return admin.render(request, "error.html", who, status=404, message="Not found.")
        body = resources.files("bot.admin").joinpath(f"static/{name}").read_bytes()
        return Response(body, media_type=STATIC_TYPES[name])

    async def not_found(request: Request, who: Who) -> Response:
        if is_api(request):
            return json_response({"error": "no such endpoint"}, 404)
        return admin.render(request, "error.html", who, status=404, message="No such page.")

    async def sign_out(request: Request, who: Who) -> Response:
        return await logout(admin, request, who)

    def route(path: str, handler: Handler, *methods: str) -> Route:
        return Route(path, guard(admin, handler), methods=list(methods or ["GET"]))

    return [
        route("/", runs),
        route("/runs", runs),
        route("/runs/{run_id}/stop", stop_run, "POST"),
        route("/sessions", sessions),
        route("/sessions/{key:path}", session),
        route("/traces", traces),
        route("/traces/{trace_id}", trace),
        route("/channels", channels),
        route("/agents", agents),
        route("/agents/{agent_id}", agent, "GET", "POST"),
        route("/agents/{agent_id}/delete", delete_agent, "POST"),
        route("/scheduled", scheduled_jobs),
        route("/scheduled/{job_id}/pause", job_action("pause"), "POST"),
        route("/scheduled/{job_id}/resume", job_action("resume"), "POST"),
        route("/scheduled/{job_id}/remove", job_action("remove"), "POST"),
        route("/usage", usage_page),
        route("/suggestions", suggestion_list),
        route("/suggestions/{id}/approve", decision(True), "POST"),
        route("/suggestions/{id}/reject", decision(False), "POST"),
        route("/static/{name}", static),
        route("/logout", sign_out, "POST"),
        # Unknown paths too are refused to anonymous visitors before anything else is said.
        route("/{path:path}", not_found, "GET", "POST", "PUT", "DELETE"),
    ]
