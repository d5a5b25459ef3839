"""``ExecProfile.approval_for``: the configured mode, else off only in an owner's direct chat."""

from __future__ import annotations

from agent_core import Approval, ExecProfile, RunRequest


def profile(approval: Approval | None = None) -> ExecProfile:
    return ExecProfile(
        backend="bwrap",
        workdir="/workspace",
        network=False,
        timeout=30,
        memory=512 << 20,
        processes=64,
        max_output=16 << 10,
        approval=approval,
        trusted=frozenset({"telegram:42", "7"}),
    )


def request(user: str, chat_type: str = "direct") -> RunRequest:
    return RunRequest("s", "hi", user, chat_type=chat_type)


def test_default_is_off_only_in_an_owner_s_direct_chat() -> None:
    p = profile()
    assert p.approval_for(request("telegram:42")) is Approval.OFF
    assert p.approval_for(request("slack:7")) is Approval.OFF  # a bare id matches any channel
    assert p.approval_for(request("telegram:42", "group")) is Approval.ASK
    assert p.approval_for(request("telegram:43")) is Approval.ASK
    assert p.approval_for(None) is Approval.ASK


def test_a_configured_mode_applies_everywhere() -> None:
    for mode in Approval:
        p = profile(mode)
        assert p.approval_for(request("telegram:42")) is mode
        assert p.approval_for(request("zalo:1", "group")) is mode
