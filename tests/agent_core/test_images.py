"""agent_core/images.py: what a model is sent for an image a user sent."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from agent_core.images import MAX_SIDE, ImageUnreadable, prepare_image
from tests.image_support import jpeg, png, size_of


def test_a_small_jpeg_keeps_its_size() -> None:
    part = prepare_image(jpeg(64, 48), name="cat.jpg", path="inbox/cat.jpg")
    assert (part.width, part.height, part.mime) == (64, 48, "image/jpeg")
    assert size_of(part.data) == ("JPEG", (64, 48))
    assert part.note() == "[image: cat.jpg, 64×48, saved to inbox/cat.jpg]"


def test_a_large_image_is_downscaled_but_the_note_names_the_original_size() -> None:
    part = prepare_image(png(3000, 1500), name="wide.png", path="inbox/wide.png")
    assert (part.width, part.height) == (3000, 1500)
    fmt, (width, height) = size_of(part.data)
    assert fmt == "JPEG" and width == MAX_SIDE and height == MAX_SIDE // 2


def test_transparency_is_kept_as_png() -> None:
    part = prepare_image(png(10, 10, transparent=True), name="a.png", path="inbox/a.png")
    assert part.mime == "image/png" and size_of(part.data)[0] == "PNG"


def test_webp_is_accepted_and_sent_as_jpeg() -> None:
    out = io.BytesIO()
    Image.new("RGB", (20, 10), "green").save(out, format="WEBP")
    part = prepare_image(out.getvalue(), name="x.webp", path="inbox/x.webp")
    assert part.mime == "image/jpeg" and size_of(part.data) == ("JPEG", (20, 10))


@pytest.mark.parametrize(
    "raw",
    [
        b"not an image at all",
        jpeg(200, 200)[:300],  # truncated mid-scan
        b"",
    ],
    ids=["garbage", "truncated", "empty"],
)
def test_a_corrupt_image_is_unreadable(raw: bytes) -> None:
    with pytest.raises(ImageUnreadable, match=r"photo\.jpg"):
        prepare_image(raw, name="photo.jpg", path="inbox/photo.jpg")


def test_a_format_outside_the_list_is_refused() -> None:
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, format="BMP")
    with pytest.raises(ImageUnreadable, match="BMP is not accepted"):
        prepare_image(out.getvalue(), name="x.bmp", path="inbox/x.bmp")
