"""What every adapter that uploads files checks first (the ``send_file`` tool, issue 29): the
file is not empty and not over the platform's upload limit, so a refused file costs no upload.

Zalo uploads nothing (its ``sendPhoto`` fetches a link, anything else becomes a note), so it
refuses nothing here: :mod:`channels.zalo._files`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from channels.protocol import FileRefused


async def upload_size(
    path: Path,
    name: str,
    *,
    platform: str,
    limit: int,
    size_text: Callable[[int], str],
    limit_of: str = "",
) -> int:
    """The size of the file at ``path`` (sent as ``name``); raises :class:`FileRefused` when it
    is empty or over ``limit`` bytes, saying so in ``platform``'s terms (``size_text`` writes a
    size, ``limit_of`` follows the limit: "… over Telegram's limit of 50.0 MB{limit_of}")."""
    size = (await asyncio.to_thread(path.stat)).st_size
    if size == 0:
        raise FileRefused(f"{name} is empty: {platform} takes no empty files")
    if size > limit:
        raise FileRefused(
            f"{name} is {size_text(size)}, over {platform}'s limit of {size_text(limit)}{limit_of}"
        )
    return size
