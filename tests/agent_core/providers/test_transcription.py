"""agent_core/providers/_transcription.py against the fake OpenAI-compatible audio endpoint."""

from __future__ import annotations

import pytest

from agent_core.errors import ProviderError, ProviderTimeout, ProviderUnavailable, RateLimited
from agent_core.providers import Transcriber
from tests.audio_support import needs_ffmpeg, opus_ogg
from tests.fakes.llm_server import FakeLLM, delay, error


async def test_the_file_goes_up_as_multipart_with_the_model(llm: FakeLLM) -> None:
    llm.script_transcripts("  hello there \n")
    transcriber = Transcriber(llm.base_url, model="whisper-large-v3")

    said = await transcriber.transcribe(b"OggS opus", filename="voice_1.ogg", mime="audio/ogg")

    assert said == "hello there"
    (upload,) = llm.audio_uploads
    assert upload.filename == "voice_1.ogg"
    assert upload.content_type == "audio/ogg"
    assert upload.data == b"OggS opus"
    assert upload.model == "whisper-large-v3"
    assert llm.requests[-1].path == "/v1/audio/transcriptions"
    assert "authorization" not in llm.requests[-1].headers  # no key, no empty Bearer


async def test_the_key_is_sent_and_never_shown() -> None:
    async with FakeLLM(api_key="sk-right") as server:
        ok = Transcriber(server.base_url, "sk-right")
        assert (
            await ok.transcribe(b"x", filename="a.ogg", mime="audio/ogg")
            == "heard 1 bytes of a.ogg"
        )
        wrong = Transcriber(server.base_url, "sk-wrong")
        with pytest.raises(ProviderError) as caught:
            await wrong.transcribe(b"x", filename="a.ogg", mime="audio/ogg")
    assert caught.value.status_code == 401
    assert "sk-wrong" not in repr(wrong) and "sk-wrong" not in str(caught.value)


@pytest.mark.parametrize(
    ("item", "kind", "status"),
    [
        (error(400, "Invalid file format."), ProviderError, 400),
        (error(429, retry_after=2), RateLimited, 429),
        (error(503), ProviderUnavailable, 503),
    ],
)
async def test_errors_are_typed_and_carry_the_servers_message(
    llm: FakeLLM, item: object, kind: type[ProviderError], status: int
) -> None:
    llm.script_transcripts(item)  # type: ignore[arg-type]
    with pytest.raises(kind) as caught:
        await Transcriber(llm.base_url).transcribe(b"x", filename="a.ogg", mime="audio/ogg")
    assert caught.value.status_code == status
    if status == 400:
        assert "Invalid file format." in str(caught.value)


async def test_a_slow_server_times_out(llm: FakeLLM) -> None:
    llm.script_transcripts(delay(30, error(500)))  # type: ignore[arg-type]
    with pytest.raises(ProviderTimeout):
        await Transcriber(llm.base_url, timeout=0.2).transcribe(
            b"x", filename="a.ogg", mime="audio/ogg"
        )


async def test_a_server_that_is_not_there_is_unavailable() -> None:
    with pytest.raises(ProviderUnavailable):
        await Transcriber("http://127.0.0.1:9/v1").transcribe(
            b"x", filename="a.ogg", mime="audio/ogg"
        )


@needs_ffmpeg
async def test_a_refused_format_is_converted_to_wav_and_sent_again(llm: FakeLLM) -> None:
    llm.audio_formats = frozenset({"audio/wav"})
    llm.script_transcripts("hello after conversion")
    voice = opus_ogg(1.0)

    said = await Transcriber(llm.base_url).transcribe(voice, filename="v.ogg", mime="audio/ogg")

    assert said == "hello after conversion"
    refused, converted = llm.audio_uploads
    assert (refused.content_type, refused.data) == ("audio/ogg", voice)
    assert (converted.filename, converted.content_type) == ("v.wav", "audio/wav")
    assert converted.data.startswith(b"RIFF") and converted.data[8:12] == b"WAVE"


async def test_without_ffmpeg_the_refusal_stands(
    llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    llm.audio_formats = frozenset({"audio/wav"})
    with pytest.raises(ProviderError) as caught:
        await Transcriber(llm.base_url).transcribe(b"OggS", filename="v.ogg", mime="audio/ogg")
    assert caught.value.status_code == 400
    assert len(llm.audio_uploads) == 1


@needs_ffmpeg
async def test_audio_ffmpeg_cannot_read_keeps_the_refusal(llm: FakeLLM) -> None:
    llm.audio_formats = frozenset({"audio/wav"})
    with pytest.raises(ProviderError, match="Invalid file format"):
        await Transcriber(llm.base_url).transcribe(b"junk", filename="v.ogg", mime="audio/ogg")
    assert len(llm.audio_uploads) == 1
