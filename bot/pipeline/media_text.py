"""How a transcript and a document's text read in the message the model gets.

A voice message is ``[voice message, 0:14] <transcript>``; a document is a header line naming
it, its pages and where it was saved, then its text. A text longer than
``media.document_max_chars`` is cut there, and the note after it says where the whole text is
(``inbox/<name>.txt``): the file tools read the rest when the model needs it, instead of every
later turn carrying it in the history.
"""

from __future__ import annotations

from agent_core import ExtractedText
from channels import Attachment


def duration_label(seconds: int) -> str:
    """``0:14``, ``12:03``, ``1:02:03``."""
    minutes, secs = divmod(max(0, seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def transcript_text(attachment: Attachment, transcript: str, path: str) -> str:
    label = "voice message" if attachment.voice else f"audio file {attachment.name}"
    if attachment.duration is not None:
        label += f", {duration_label(attachment.duration)}"
    spoken = transcript or "(no speech recognized)"
    return f"[{label}] {spoken}\n[the audio is saved to {path}]"


def document_text(
    name: str, path: str, extracted: ExtractedText, *, max_chars: int, full_path: str | None
) -> str:
    facts = [name]
    if extracted.pages is not None:
        facts.append(f"{extracted.pages} page{'s' if extracted.pages != 1 else ''}")
        if extracted.cut:
            facts[-1] += f", the first {extracted.pages_read} read"
    facts.append(f"saved to {path}")
    header = f"[document: {', '.join(facts)}]"
    text = extracted.text
    if not text.strip():
        return f"{header}\n[no text could be extracted from it]"
    if len(text) <= max_chars:
        return f"{header}\n{text}"
    where = (
        f"the whole text is saved to {full_path}"
        if full_path
        else "the whole text could not be saved (the workspace is full)"
    )
    return (
        f"{header}\n{text[:max_chars]}\n"
        f"[{name}: only the first {max_chars:,} of {len(text):,} characters are shown; {where}]"
    )
