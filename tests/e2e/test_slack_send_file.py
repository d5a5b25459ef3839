"""The ``send_file`` tool on Slack (issue 29): the real slack_sdk runs ``files_upload_v2``
against the fake Slack (``files.getUploadURLExternal``, the POST of the bytes to the upload
URL, ``files.completeUploadExternal``), into the thread the answer goes to."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.llm_server import FakeLLM, text
from tests.fakes.slack_events import message_event
from tests.fakes.slack_server import FakeSlack
from tests.image_support import png
from tests.send_file_support import send_file, sparse_file, tool_results, workspace_file
from tests.slack_support import Bot

USER = "slack:UALICE"


async def test_a_file_is_uploaded_in_three_steps_with_its_caption(
    tmp_path: Path, bot: Bot, slack: FakeSlack, llm: FakeLLM
) -> None:
    report = bytes(range(256)) * 100
    workspace_file(tmp_path, USER, "out/report.pdf", report)
    llm.script(send_file("out/report.pdf", "The *Q3* report"), text("Uploaded."))
    await bot.event(message_event("report please", channel="D1"))
    await slack.wait_for(lambda: slack.posts)
    await bot.settle()

    [shared] = slack.files
    assert shared.data == report
    assert (shared.filename, shared.title) == ("report.pdf", "report.pdf")
    assert (shared.channel, shared.thread_ts) == ("D1", None)
    assert shared.initial_comment == "The *Q3* report"
    [url_call] = slack.calls_of("files.getUploadURLExternal")
    assert url_call.args["filename"] == "report.pdf"
    assert url_call.args["length"] == str(len(report))
    assert len(slack.calls_of("files.completeUploadExternal")) == 1
    assert [p.text for p in slack.posts] == ["Uploaded."]
    assert "to the chat as a document" in tool_results(llm)[0]


async def test_in_a_channel_the_file_goes_into_the_thread_of_the_answer(
    tmp_path: Path, bot: Bot, slack: FakeSlack, llm: FakeLLM
) -> None:
    picture = png(30, 20)
    workspace_file(tmp_path, USER, "chart.png", picture)
    llm.script(send_file("chart.png"), text("Here."))
    event = message_event("<@UBOT> chart", channel="C1")
    await bot.event(event)
    await slack.wait_for(lambda: slack.posts)
    await bot.settle()

    [shared] = slack.files
    assert shared.data == picture
    assert (shared.channel, shared.thread_ts) == ("C1", event["ts"])
    assert shared.ts in [m["ts"] for m in slack.threads[("C1", event["ts"])]]
    assert slack.posts[0].thread_ts == event["ts"]
    assert "as a photo" in tool_results(llm)[0]


async def test_a_file_over_slacks_limit_is_refused_before_any_upload(
    tmp_path: Path, bot: Bot, slack: FakeSlack, llm: FakeLLM
) -> None:
    sparse_file(workspace_file(tmp_path, USER, "huge.iso"), 1_200_000_000)
    llm.script(send_file("huge.iso"), text("Too big, sorry."))
    await bot.event(message_event("the image", channel="D1"))
    await slack.wait_for(lambda: slack.posts)
    await bot.settle()

    assert not slack.calls_of("files.getUploadURLExternal") and not slack.files
    [result] = tool_results(llm)
    assert "huge.iso is 1.2 GB, over Slack's limit of 1.0 GB; nothing was sent" in result
