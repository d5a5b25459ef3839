"""Small real images, made with Pillow, for the media tests."""

from __future__ import annotations

import io

from PIL import Image


def jpeg(width: int = 64, height: int = 48, color: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="JPEG")
    return out.getvalue()


def png(width: int = 64, height: int = 48, *, transparent: bool = False) -> bytes:
    out = io.BytesIO()
    mode, color = ("RGBA", (0, 0, 255, 0)) if transparent else ("RGB", (0, 0, 255))
    Image.new(mode, (width, height), color).save(out, format="PNG")
    return out.getvalue()


def size_of(data: bytes) -> tuple[str | None, tuple[int, int]]:
    with Image.open(io.BytesIO(data)) as image:
        return image.format, image.size
