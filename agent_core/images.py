"""Turning an image file a user sent into what a model accepts.

Models take PNG or JPEG, and the big providers shrink anything larger than about 2000 px anyway
(billing the full upload), so a picture is re-encoded here: opaque pictures as JPEG, ones with
transparency as PNG, scaled down when the longest side is over :data:`MAX_SIDE`.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from agent_core.errors import AgentError
from agent_core.messages import ImagePart

MAX_SIDE = 2048
ACCEPTED_FORMATS = frozenset({"JPEG", "PNG", "WEBP", "GIF"})
if TYPE_CHECKING:
    from PIL.Image import Image as PilImage

_JPEG_QUALITY = 85
# A decompression bomb (a small file that decodes to gigapixels) must fail, not eat the memory.
_MAX_PIXELS = 64_000_000


class ImageUnreadable(AgentError, ValueError):
    """The bytes are not an image of an accepted format (corrupt, truncated, or another type)."""


def prepare_image(raw: bytes, *, name: str, path: str, max_side: int = MAX_SIDE) -> ImagePart:
    """``raw`` decoded, checked, downscaled if needed and re-encoded for a model.

    ``width`` and ``height`` of the result are the original's: the note tells the model what
    the user sent, not what was resampled. Raises :class:`ImageUnreadable`.
    """
    # Pillow loads with the first image, not at start-up (what a start imports: issue 16).
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(raw)) as image:
            if image.format not in ACCEPTED_FORMATS:
                raise ImageUnreadable(f"{name}: {image.format or 'unknown'} is not accepted")
            width, height = image.size
            if width * height > _MAX_PIXELS:
                raise ImageUnreadable(f"{name}: {width}×{height} is too many pixels")
            image.load()  # a truncated file fails here, not at the model
            data, mime = _encode(image, max_side)
    except ImageUnreadable:
        raise
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageUnreadable(f"{name}: not a readable image ({exc})") from exc
    return ImagePart(name=name, path=path, width=width, height=height, mime=mime, data=data)


def _encode(image: PilImage, max_side: int) -> tuple[bytes, str]:
    from PIL import Image

    frame = image.copy()  # the first frame of a GIF or animated WebP
    if max(frame.size) > max_side:
        frame.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    transparent = frame.mode in ("RGBA", "LA") or (
        frame.mode == "P" and "transparency" in frame.info
    )
    out = io.BytesIO()
    if transparent:
        frame.convert("RGBA").save(out, format="PNG", optimize=True)
        return out.getvalue(), "image/png"
    frame.convert("RGB").save(out, format="JPEG", quality=_JPEG_QUALITY)
    return out.getvalue(), "image/jpeg"
