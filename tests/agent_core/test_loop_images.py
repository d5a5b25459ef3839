"""The loop with a user's images (issue 29), against the fake OpenAI-compatible server: a
model that refuses image parts gets the images' notes instead, and the run still answers."""

from __future__ import annotations

from pathlib import Path

from agent_core import AgentSettings, EventBus, ImagePart, MemoryStore, RunRequest, RunStatus
from agent_core.loop import Loop
from agent_core.providers import OpenAICompatProvider
from agent_core.retry import RetryPolicy
from agent_core.tools import ToolRegistry
from tests.fakes.llm_server import FakeLLM, error, text

PHOTO = ImagePart("cat.jpg", "inbox/cat.jpg", 64, 48, "image/jpeg", b"\xff\xd8\xff")
NOTE = "[image: cat.jpg, 64×48, saved to inbox/cat.jpg]"


async def run(llm: FakeLLM, tmp_path: Path, store: MemoryStore) -> RunStatus:
    provider = OpenAICompatProvider(llm.base_url)
    loop = Loop(
        AgentSettings(id="main", model="fake-model", workspace=tmp_path),
        provider,
        ToolRegistry(),
        store,
        store,
        EventBus(),
        retry=RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01),
    )
    try:
        result = await loop.run(RunRequest("s", "what?", "alice", images=(PHOTO,)))
    finally:
        await provider.aclose()
    return result.status


async def test_a_provider_that_refuses_images_gets_their_notes(
    llm: FakeLLM, tmp_path: Path
) -> None:
    llm.script(error(400, "image input is not supported by this model"), text("a cat, I guess"))
    store = MemoryStore()

    assert await run(llm, tmp_path, store) is RunStatus.COMPLETED

    refused, retried = (r.json["messages"][-1]["content"] for r in llm.chat_requests)
    assert [p["type"] for p in refused] == ["text", "image_url"]
    assert retried == f"what?\n{NOTE}"
    history = (await store.load_history("s")).messages
    assert [m.content for m in history] == [f"what?\n{NOTE}", "a cat, I guess"]


async def test_a_refusal_without_images_is_not_retried(llm: FakeLLM, tmp_path: Path) -> None:
    llm.script(error(400, "bad request"))
    provider = OpenAICompatProvider(llm.base_url)
    store = MemoryStore()
    loop = Loop(
        AgentSettings(id="main", model="fake-model", workspace=tmp_path),
        provider,
        ToolRegistry(),
        store,
        store,
        EventBus(),
    )
    try:
        result = await loop.run(RunRequest("s", "what?", "alice"))
    finally:
        await provider.aclose()
    assert result.status is RunStatus.FAILED
    assert len(llm.chat_requests) == 1
