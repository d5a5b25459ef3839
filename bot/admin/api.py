"""``/admin/api/``: the dashboard's data as JSON, for scripts (``Authorization: Bearer``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bot.admin import agent_edit, queries, suggestions, usage
from bot.admin.context import Admin, Who, json_body, json_response
from bot.admin.gate import Handler, guard
from bot.admin.stream import events_response
from bot.usage.report import BadPeriod


def api_routes(admin: Admin) -> list[BaseRoute]:
    loopgate = admin.loopgate

    async def runs(request: Request, who: Who) -> Response:
        return json_response({"runs": admin.tracker.runs()})

    async def stop_run(request: Request, who: Who) -> Response:
        run_id = request.path_params["run_id"]
        if not await admin.tracker.stop(run_id, by=who.actor):
            return json_response({"error": f"no running run {run_id}"}, 404)
        return json_response({"stopped": run_id})

    async def events(request: Request, who: Who) -> Response:
        return events_response(loopgate, admin.tracker)

    async def sessions(request: Request, who: Who) -> Response:
        limit = queries.clamp(request.query_params.get("limit"), 100)
        return json_response({"sessions": await queries.sessions(loopgate, limit=limit)})

    async def messages(request: Request, who: Who) -> Response:
        key = request.path_params["key"]
        limit = queries.clamp(request.query_params.get("limit"), 200)
        found = await queries.session_messages(loopgate, key, limit=limit)
        if found is None:
            return json_response({"error": f"no session {key}"}, 404)
        return json_response(found)

    async def traces(request: Request, who: Who) -> Response:
        last = queries.clamp(request.query_params.get("last"), 20)
        session = request.query_params.get("session") or None
        found = await queries.recent_traces(loopgate, last=last, session=session)
        return json_response({"traces": found})

    async def trace(request: Request, who: Who) -> Response:
        found = await queries.trace_tree(loopgate, request.path_params["trace_id"])
        if found is None:
            return json_response({"error": "no such trace (or run)"}, 404)
        return json_response(found)

    async def channels(request: Request, who: Who) -> Response:
        report = await queries.channels(loopgate, last=0)
        return json_response(report["health"])

    async def inbox(request: Request, who: Who) -> Response:
        last = queries.clamp(request.query_params.get("last"), 50)
        report = await queries.channels(loopgate, last=last)
        return json_response(
            {"counts": report["health"].get("inbox", {}), "entries": report["inbox"]}
        )

    async def agents(request: Request, who: Who) -> Response:
        return json_response({"agents": await agent_edit.list_agents(loopgate)})

    async def agent(request: Request, who: Who) -> Response:
        agent_id = request.path_params["agent_id"]
        if request.method == "DELETE":
            if not await agent_edit.delete_agent(loopgate, agent_id):
                return json_response({"error": f"no stored agent {agent_id}"}, 404)
            return json_response({"deleted": agent_id})
        if request.method == "PUT":
            body = await json_body(request)
            if body is None:
                return json_response({"error": "expected a JSON object"}, 400)
            try:
                changes = agent_edit.parse_changes(body)
                return json_response(await agent_edit.save_agent(loopgate, agent_id, changes))
            except agent_edit.AgentEditError as exc:
                return json_response({"error": str(exc), "fields": exc.problems}, 400)
        found = await agent_edit.get_agent(loopgate, agent_id)
        if found is None:
            return json_response({"error": f"no agent {agent_id}"}, 404)
        return json_response(found)

    async def suggestion_list(request: Request, who: Who) -> Response:
        try:
            status = suggestions.parse_status(request.query_params.get("status"))
        except ValueError:
            return json_response({"error": "unknown status"}, 400)
        agent_id = request.query_params.get("agent") or None
        found = await suggestions.list_suggestions(loopgate, status=status, agent_id=agent_id)
        return json_response({"suggestions": found})

    async def metrics(request: Request, who: Who) -> Response:
        agent_id = request.query_params.get("agent") or None
        return json_response({"metrics": await suggestions.metrics(loopgate, agent_id)})

    async def suggestion(request: Request, who: Who) -> Response:
        found = await suggestions.get_suggestion(loopgate, request.path_params["id"])
        if found is None:
            return json_response({"error": "no such suggestion"}, 404)
        return json_response(found)

    async def usage_report(request: Request, who: Who) -> Response:
        params = request.query_params
        try:
            return json_response(
                await usage.report(loopgate, params.get("since"), params.get("by"))
            )
        except BadPeriod as exc:
            return json_response({"error": str(exc)}, 400)

    def decision(approve: bool) -> Handler:
        async def decide(request: Request, who: Who) -> Response:
            body = await json_body(request) or {}
            reason = str(body.get("reason", ""))[:1000]
            try:
                decided = await suggestions.decide(
                    loopgate, request.path_params["id"], approve=approve, by=who.actor,
                    reason=reason,
                )  # fmt: skip
            except ValueError as exc:  # no longer pending, locked, stale
                return json_response({"error": str(exc)}, 409)
            if decided is None:
                return json_response({"error": "no such suggestion"}, 404)
            return json_response(decided)

        return decide

    def route(path: str, handler: Handler, *methods: str) -> Route:
        return Route(f"/api/{path}", guard(admin, handler), methods=list(methods or ["GET"]))

    return [
        route("runs", runs),
        route("runs/{run_id}/stop", stop_run, "POST"),
        route("events", events),
        route("sessions", sessions),
        route("sessions/{key:path}/messages", messages),
        route("traces", traces),
        route("traces/{trace_id}", trace),
        route("channels", channels),
        route("inbox", inbox),
        route("agents", agents),
        route("agents/{agent_id}", agent, "GET", "PUT", "DELETE"),
        route("suggestions", suggestion_list),
        route("metrics", metrics),
        route("usage", usage_report),
        route("suggestions/{id}", suggestion),
        route("suggestions/{id}/approve", decision(True), "POST"),
        route("suggestions/{id}/reject", decision(False), "POST"),
    ]
