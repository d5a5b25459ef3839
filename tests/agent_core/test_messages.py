"""Messages, tool calls and usage as the agent core stores them."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from agent_core.messages import ImagePart, Message, SessionHistory, ToolCall, Usage


class TestToolCallArguments:
    def test_json_object_is_parsed(self) -> None:
        call = ToolCall("c1", "write_file", '{"path": "a.md", "content": "x"}')
        assert call.parsed_arguments() == {"path": "a.md", "content": "x"}

    @pytest.mark.parametrize("raw", ["", "{}"])
    def test_empty_arguments_are_an_empty_object(self, raw: str) -> None:
        assert ToolCall("c1", "list_files", raw).parsed_arguments() == {}

    def test_invalid_json_says_where(self) -> None:
        with pytest.raises(ValueError, match=r"not valid JSON: .* at char 9"):
            ToolCall("c1", "read_file", '{"path": ').parsed_arguments()

    @pytest.mark.parametrize("raw", ["[1, 2]", '"a.md"', "3", "null"])
    def test_non_object_is_refused(self, raw: str) -> None:
        with pytest.raises(ValueError, match="must be a JSON object"):
            ToolCall("c1", "read_file", raw).parsed_arguments()


class TestMessage:
    def test_constructors_set_the_role(self) -> None:
        assert Message.system("s") == Message("system", "s")
        assert Message.user("u") == Message("user", "u")
        assert Message.assistant() == Message("assistant", "")

    def test_assistant_carries_tool_calls(self) -> None:
        call = ToolCall("c1", "read_file", "{}")
        message = Message.assistant("looking", (call,))
        assert message.tool_calls == (call,) and message.content == "looking"

    def test_tool_result_answers_its_call(self) -> None:
        call = ToolCall("c7", "read_file", "{}")
        result = Message.tool(call, "file text")
        assert result.role == "tool"
        assert result.tool_call_id == "c7" and result.name == "read_file"
        assert result.content == "file text"

    def test_messages_are_immutable_and_hashable(self) -> None:
        message = Message.user("hi")
        with pytest.raises(dataclasses.FrozenInstanceError):
            message.content = "changed"  # type: ignore[misc]
        assert {message: 1}[Message.user("hi")] == 1


class TestImages:
    PHOTO = ImagePart("cat.jpg", "inbox/cat.jpg", 1280, 960, "image/jpeg", b"\xff\xd8jpeg")

    def test_the_note_names_the_saved_path_and_size(self) -> None:
        assert self.PHOTO.note() == "[image: cat.jpg, 1280×960, saved to inbox/cat.jpg]"

    def test_the_data_url_carries_the_bytes_in_base64(self) -> None:
        url = self.PHOTO.data_url()
        assert url.startswith("data:image/jpeg;base64,")
        assert base64.b64decode(url.split(",", 1)[1]) == b"\xff\xd8jpeg"

    def test_history_form_keeps_the_note_and_drops_the_bytes(self) -> None:
        stored = Message.user("what is this?", (self.PHOTO,)).with_image_notes()
        assert stored.images == ()
        assert stored.content == "what is this?\n" + self.PHOTO.note()
        assert Message.user("", (self.PHOTO,)).with_image_notes().content == self.PHOTO.note()

    def test_bytes_never_show_in_repr(self) -> None:
        assert "xd8" not in repr(self.PHOTO)


class TestUsage:
    def test_add_and_total(self) -> None:
        usage = Usage()
        usage.add(Usage(10, 5))
        usage.add(Usage(3, 2))
        assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (13, 7, 20)

    def test_as_dict(self) -> None:
        assert Usage(4, 6, 3, 1).as_dict() == {
            "input_tokens": 4,
            "output_tokens": 6,
            "cached_input_tokens": 3,
            "cache_write_tokens": 1,
            "total_tokens": 10,
        }


def test_session_histories_do_not_share_their_lists() -> None:
    first, second = SessionHistory(), SessionHistory()
    first.messages.append(Message.user("hi"))
    assert second.messages == [] and second.summary is None
