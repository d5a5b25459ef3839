"""Voice messages and audio files sent on Telegram reach the model as transcripts (issue 29):
python-telegram-bot fetches the file from the fake Bot API, the bot uploads it as it is to the
fake LLM's ``/audio/transcriptions`` and the model gets ``[voice message, 0:14] <transcript>``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core import user_workspace
from bot.app import Loopgate
from tests.audio_support import needs_ffmpeg, opus_ogg
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, delay, error, text
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import telegram_section

OPUS = b"OggS\x00\x02" + bytes(range(256)) * 4  # the bytes only travel, nobody decodes them


def config(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, **sections: Any) -> Any:
    return make_config(tmp_path, llm, channels={"telegram": telegram_section(tg)}, **sections)


def inbox_file(tmp_path: Path, name: str) -> Path:
    return user_workspace(tmp_path / "workspaces", "telegram:42") / "inbox" / name


def last_user_content(llm: FakeLLM) -> Any:
    return llm.last_request.json["messages"][-1]["content"]


async def test_a_voice_message_is_uploaded_as_sent_and_the_model_gets_its_transcript(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    llm.script_transcripts("call Anna at nine")
    async with Loopgate(config(tmp_path, llm, tg)):
        update = tg.private_message(None, voice=tg.voice(OPUS, duration=14))
        name = f"voice_{update['message']['message_id']}.ogg"
        tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 1)

    (upload,) = llm.audio_uploads
    assert (upload.filename, upload.content_type, upload.model) == (name, "audio/ogg", "whisper-1")
    assert upload.data == OPUS  # no transcoding
    assert last_user_content(llm) == (
        f"[voice message, 0:14] call Anna at nine\n[the audio is saved to inbox/{name}]"
    )
    assert inbox_file(tmp_path, name).read_bytes() == OPUS


async def test_an_audio_file_with_a_caption_and_another_transcription_provider(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    async with FakeLLM(api_key="speech-key") as speech:
        speech.script_transcripts("la la la")
        providers = {
            "openai": {"base_url": llm.base_url, "model": "fake-model"},
            "speech": {"base_url": speech.base_url, "api_key": "speech-key"},
        }
        media = {"transcription": {"provider": "speech", "model": "whisper-large-v3"}}
        async with Loopgate(config(tmp_path, llm, tg, providers=providers, media=media)):
            audio = tg.audio(b"ID3 fake mp3", file_name="demo.mp3", duration=185)
            tg.push(tg.private_message(None, audio=audio, caption="which song?"))
            await tg.wait_for(lambda: len(tg.texts()) == 1)

    assert llm.audio_uploads == []
    (upload,) = speech.audio_uploads
    assert (upload.model, upload.data) == ("whisper-large-v3", b"ID3 fake mp3")
    assert speech.requests[0].headers["authorization"] == "Bearer speech-key"
    assert last_user_content(llm) == (
        "which song?\n[audio file demo.mp3, 3:05] la la la\n[the audio is saved to inbox/demo.mp3]"
    )


@pytest.mark.parametrize(
    "failure", [error(500), error(400, "Invalid file format."), delay(30, error(500))]
)
async def test_a_failed_transcription_is_told_once_and_the_audio_still_saved(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, failure: Any
) -> None:
    llm.script_transcripts(failure)
    media = {"transcription": {"timeout": 0.5}}  # the delayed one times out
    async with Loopgate(config(tmp_path, llm, tg, media=media)):
        update = tg.private_message(None, voice=tg.voice(OPUS), caption="listen")
        name = f"voice_{update['message']['message_id']}.ogg"
        tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 2)

    assert tg.texts() == [
        f"Skipped: {name} (could not be transcribed).",
        f"echo: listen\n[attachment skipped: {name} (could not be transcribed); "
        f"saved to inbox/{name}]",
    ]
    assert len(llm.audio_uploads) == 1  # not retried behind the user's back
    assert inbox_file(tmp_path, name).read_bytes() == OPUS


async def test_a_voice_message_over_the_size_limit_is_not_downloaded(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    async with Loopgate(config(tmp_path, llm, tg, media={"max_bytes": "1KiB"})):
        update = tg.private_message(None, voice=tg.voice(OPUS, size=5000))
        name = f"voice_{update['message']['message_id']}.ogg"
        tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 2)

    assert tg.texts()[0] == f"Skipped: {name} (5 KB, over the 1 KB limit)."
    assert not tg.calls_of("getFile")
    assert llm.audio_uploads == []


async def test_a_voice_message_cut_off_by_a_restart_is_fetched_and_transcribed_again(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    llm.script(delay(30, text("never sent")), text("noted"))
    llm.script_transcripts("first hearing", "second hearing")
    cfg = config(tmp_path, llm, tg, bot={"shutdown_grace": 0.2})
    async with Loopgate(cfg):
        tg.push(tg.private_message(None, voice=tg.voice(OPUS, duration=3)))
        await llm.wait_for(lambda: len(llm.chat_requests) == 1)
    assert tg.texts() == []
    async with Loopgate(cfg):
        await tg.wait_for(lambda: tg.texts() == ["noted"])

    assert len(tg.file_downloads) == 2
    assert [u.data for u in llm.audio_uploads] == [OPUS, OPUS]
    second = llm.chat_requests[1].json["messages"][-1]["content"]
    assert second.startswith("[voice message, 0:03] second hearing\n")


async def test_a_voice_message_streams_and_may_be_answered_with_no_reply(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    # Media turns go the way text turns go: a streamed answer (the default), NO_REPLY.
    llm.script(text("Sure, ", "at nine."), text("NO_REPLY"))
    section = {**telegram_section(tg), "streaming": "partial"}
    async with Loopgate(make_config(tmp_path, llm, channels={"telegram": section})):
        tg.push(tg.private_message(None, voice=tg.voice(OPUS, duration=2)))
        await tg.wait_for(lambda: any(m.text == "Sure, at nine." for m in tg.messages.values()))
        tg.push(tg.private_message(None, voice=tg.voice(OPUS, duration=1)))
        await llm.wait_for(lambda: len(llm.chat_requests) == 2)
        await llm.wait_for(lambda: len(llm.audio_uploads) == 2)

    second = llm.chat_requests[1].json["messages"][-1]["content"]
    assert second.startswith("[voice message, 0:01] heard ")
    assert [m.text for m in tg.messages.values() if not m.deleted] == ["Sure, at nine."]


@needs_ffmpeg
async def test_a_server_that_refuses_ogg_gets_the_voice_message_as_wav(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    llm.audio_formats = frozenset({"audio/wav", "audio/mpeg"})
    llm.script_transcripts("converted and heard")
    voice = opus_ogg(1.0)
    async with Loopgate(config(tmp_path, llm, tg)):
        update = tg.private_message(None, voice=tg.voice(voice, duration=1))
        name = f"voice_{update['message']['message_id']}.ogg"
        tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 1)

    assert [u.content_type for u in llm.audio_uploads] == ["audio/ogg", "audio/wav"]
    assert last_user_content(llm).startswith("[voice message, 0:01] converted and heard\n")
    assert tg.texts() == [
        f"echo: [voice message, 0:01] converted and heard\n[the audio is saved to inbox/{name}]"
    ]
    assert inbox_file(tmp_path, name).read_bytes() == voice  # the original is what is kept
