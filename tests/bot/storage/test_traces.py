"""bot/storage/traces.py: a trace round trip and ``recent_traces``' order and filters; traces
across runs: a spawned or delegated run's trace names its parent trace and tool span;
``recent_traces`` lists top-level runs only, ``children_of`` the next level, ``render_tree``
nests child runs under the span that started them (``loopgate traces`` is in
tests/bot/cli/test_traces.py).

Store tests run on SQLite and (when LOOPGATE_TEST_POSTGRES_URL is set) Postgres.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from agent_core.tracing import SpanKind, Trace, new_trace, render_tree, tool_span_id
from bot.storage import Database, SqlTraceStore
from bot.storage.models import TraceRow
from bot.storage.traces import child_traces

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def run_trace(
    agent: str,
    *,
    parent: Trace | None = None,
    span_id: str | None = None,
    offset: float = 0,
    tool: str | None = None,
    call_id: str = "call-1",
    session: str = "s",
) -> Trace:
    """A finished trace: root, one LLM span and (``tool``) an async tool span whose id is the
    one the loop gives a tool call's span; a child of ``parent`` when given."""
    trace = new_trace(
        f"run-{agent}",
        session,
        agent,
        parent_trace_id=parent.id if parent else None,
        parent_span_id=span_id,
    )
    trace.started_at = T0 + timedelta(seconds=offset)
    trace.start_span(SpanKind.LLM, "scripted/m").end()
    if tool is not None:
        span = trace.start_span(SpanKind.ASYNC_TOOL, tool)
        span.id = tool_span_id(trace.id, call_id)
        span.end()
    trace.start_span(SpanKind.LLM, "scripted/m").end()
    trace.finish("completed", output=f"{agent} done")
    trace.ended_at = trace.started_at + timedelta(seconds=1)
    return trace


def tool_span(trace: Trace) -> str:
    return next(s.id for s in trace.spans if s.kind is SpanKind.ASYNC_TOOL)


async def test_parent_ids_round_trip_and_recent_traces_hides_children(db: Database) -> None:
    store = SqlTraceStore(db)
    lead = run_trace("lead", tool="spawn")
    worker = run_trace("worker", parent=lead, span_id=tool_span(lead), offset=1, tool="delegate")
    helper = run_trace("helper", parent=worker, span_id=tool_span(worker), offset=2)
    other = run_trace("other", offset=3, session="s2")
    for trace in (helper, worker, lead, other):  # children end (and are saved) first
        await store.save_trace(trace)

    assert [t.id for t in await store.recent_traces()] == [other.id, lead.id]
    assert [t.id for t in await store.recent_traces(session_key="s")] == [lead.id]
    [loaded] = await store.recent_traces(session_key="s")
    assert (loaded.parent_trace_id, loaded.parent_span_id) == (None, None)

    [child] = await store.children_of([lead.id])  # direct children only, not the grandchild
    assert child.id == worker.id
    assert (child.parent_trace_id, child.parent_span_id) == (lead.id, tool_span(lead))
    assert [s.id for s in child.spans] == [s.id for s in worker.spans]
    assert child.spans[2].kind is SpanKind.ASYNC_TOOL
    assert [t.id for t in await store.children_of([worker.id, other.id])] == [helper.id]
    assert await store.children_of([]) == []
    assert await store.children_of([helper.id]) == []


def test_render_tree_nests_child_runs_under_their_tool_span() -> None:
    lead = run_trace("lead", tool="spawn")
    worker = run_trace("worker", parent=lead, span_id=tool_span(lead), tool="delegate")
    helper = run_trace("helper", parent=worker, span_id=tool_span(worker))
    children = {tool_span(lead): [worker], tool_span(worker): [helper]}

    assert render_tree(lead) == render_tree(lead, {})  # no children: the same as before
    lines = render_tree(lead, children)
    assert not any("agent=worker" in line for line in render_tree(lead))
    spawn = next(i for i, line in enumerate(lines) if "async_tool spawn" in line)
    worker_at = next(i for i, line in enumerate(lines) if "agent=worker" in line)
    helper_at = next(i for i, line in enumerate(lines) if "agent=helper" in line)
    last_llm = max(i for i, line in enumerate(lines) if line.lstrip().startswith("└─ llm"))
    assert spawn < worker_at < helper_at < last_llm  # nested in place, not appended at the end

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip())

    assert lines[spawn].strip().startswith("└─ async_tool spawn")
    assert lines[worker_at].lstrip().startswith("↳ ") and indent(lines[worker_at]) > indent(
        lines[spawn]
    )
    delegate = next(i for i, line in enumerate(lines) if "async_tool delegate" in line)
    assert worker_at < delegate < helper_at
    assert indent(lines[helper_at]) > indent(lines[delegate]) > indent(lines[worker_at])
    worker_output = next(i for i, line in enumerate(lines) if "output: worker done" in line)
    assert helper_at < worker_output < last_llm  # after its whole subtree, still nested
    assert indent(lines[worker_output]) > indent(lines[worker_at])
    assert lines[-1] == "  output: lead done"  # the lead's own output stays last, unindented


def test_render_tree_survives_a_cycle() -> None:
    a = run_trace("a", tool="spawn")
    b = run_trace("b", parent=a, span_id=tool_span(a), tool="spawn")
    cyclic = {tool_span(a): [b], tool_span(b): [a]}  # impossible from real runs; hand-edited
    lines = render_tree(a, cyclic)
    assert sum("agent=b" in line for line in lines) == 1
    assert sum("agent=a" in line for line in lines) == 1


async def test_child_traces_goes_down_a_bounded_number_of_levels(db: Database) -> None:
    store = SqlTraceStore(db)
    chain = [run_trace("a0", tool="spawn")]
    for i in range(1, 8):
        parent = chain[-1]
        chain.append(
            run_trace(f"a{i}", parent=parent, span_id=tool_span(parent), offset=i, tool="spawn")
        )
    for trace in chain:
        await store.save_trace(trace)
    found = await child_traces(store, [chain[0]], depth=3)
    assert [t.agent_id for ts in found.values() for t in ts] == ["a1", "a2", "a3"]
    assert [t.id for t in found[tool_span(chain[0])]] == [chain[1].id]
    deep = await child_traces(store, [chain[0]])
    assert len(deep) == 5  # MAX_DEPTH levels below the top run


async def test_child_without_its_span_goes_under_the_parent_root(db: Database) -> None:
    store = SqlTraceStore(db)
    lead = run_trace("lead")  # no tool span recorded (e.g. the parent was cut short)
    orphan = run_trace("orphan", parent=lead, span_id="not-a-span-of-lead", offset=1)
    await store.save_trace(orphan)
    await store.save_trace(lead)
    found = await child_traces(store, [lead])
    assert [t.id for t in found[lead.root.id]] == [orphan.id]
    assert any("agent=orphan" in line for line in render_tree(lead, found))


async def test_trace_round_trip(db: Database) -> None:
    store = SqlTraceStore(db)
    trace = new_trace("run-1", "s", "agent")
    trace.root.attributes["input_preview"] = "hello \x00"
    llm = trace.start_span(SpanKind.LLM, "gpt", model="m", when=datetime.now(UTC))
    llm.end(input_tokens=3)
    tool = trace.start_span(SpanKind.TOOL, "read_file", path="x")
    tool.end(error=True)
    trace.input_tokens, trace.output_tokens = 3, 4
    trace.finish("completed", output="done")
    await store.save_trace(trace)
    await store.save_trace(trace)  # saving again replaces, not duplicates

    [loaded] = await store.recent_traces(session_key="s")
    assert (loaded.id, loaded.run_id, loaded.status, loaded.output_preview) == (
        trace.id,
        "run-1",
        "completed",
        "done",
    )
    assert (loaded.input_tokens, loaded.output_tokens) == (3, 4)
    assert loaded.started_at == trace.started_at and loaded.ended_at == trace.ended_at
    assert [s.id for s in loaded.spans] == [s.id for s in trace.spans]
    assert loaded.root.parent_id is None
    assert {s.parent_id for s in loaded.spans[1:]} == {trace.root.id}
    assert [s.kind for s in loaded.spans] == [SpanKind.AGENT, SpanKind.LLM, SpanKind.TOOL]
    assert loaded.spans[2].error and not loaded.spans[1].error
    assert loaded.spans[1].attributes["input_tokens"] == 3
    assert isinstance(loaded.spans[1].attributes["when"], str)  # non-JSON values as text
    query = select(TraceRow.input_preview).where(TraceRow.id == trace.id)
    preview = await db.run_read(lambda conn: conn.execute(query).scalar())
    assert preview == "hello \ufffd"


async def test_recent_traces_order_filter_and_limit(db: Database) -> None:
    store = SqlTraceStore(db)
    base = datetime.now(UTC)
    for i in range(5):
        trace = new_trace(f"run-{i}", "a" if i % 2 == 0 else "b", "agent")
        trace.started_at = base + timedelta(seconds=i)
        trace.finish("completed")
        await store.save_trace(trace)
    assert [t.run_id for t in await store.recent_traces(limit=3)] == ["run-4", "run-3", "run-2"]
    assert [t.run_id for t in await store.recent_traces(session_key="b")] == ["run-3", "run-1"]
    assert await store.recent_traces(session_key="none") == []
