"""agent_core/orchestration/memory_store.py: the in-memory task store the SQL store mirrors."""

from __future__ import annotations

import pytest

from agent_core.orchestration.memory_store import MemoryOrchestrationStore
from agent_core.orchestration.records import TaskConflict, TaskStatus


class TestTaskStore:
    async def test_claim_is_for_the_assignee_and_once(self) -> None:
        store = MemoryOrchestrationStore()
        task = await store.create_task("t", "x", "", created_by="lead", assignee="a")
        assert task.status is TaskStatus.ASSIGNED
        with pytest.raises(TaskConflict):
            await store.claim_task(task.id, "b")
        claimed = await store.claim_task(task.id, "a")
        assert claimed.status is TaskStatus.IN_PROGRESS
        with pytest.raises(TaskConflict):
            await store.claim_task(task.id, "a")

    async def test_only_the_assignee_finishes_and_only_once(self) -> None:
        store = MemoryOrchestrationStore()
        task = await store.create_task("t", "x", "", created_by="lead", assignee="a")
        with pytest.raises(TaskConflict):
            await store.finish_task(task.id, "b", TaskStatus.COMPLETED, "mine")
        done = await store.finish_task(task.id, "a", TaskStatus.COMPLETED, "ok")
        assert (done.status, done.result) == (TaskStatus.COMPLETED, "ok")
        with pytest.raises(TaskConflict):
            await store.finish_task(task.id, None, TaskStatus.FAILED, "late")
