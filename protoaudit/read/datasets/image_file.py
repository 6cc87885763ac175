"""An image's size and channel count as OpenCV decodes it for Caffe, from its header (Pillow).

Caffe decodes with OpenCV: `cv::imread`/`cv::imdecode` with IMREAD_COLOR (3 channels) or
IMREAD_GRAYSCALE (1) where a layer says is_color / force_color / force_gray, else with -1
(IMREAD_UNCHANGED, DecodeDatumToCVMatNative, io.cpp:166-171), which keeps the file's own channels:
grey 1, colour 3, and 4 where the file has alpha (PNG's grey+alpha and RGB+alpha, a palette or RGB
image with a tRNS chunk: OpenCV's PNG decoder reads those as 4 channels). Only the header is
decoded; the file is checked whole (PNG: every chunk to IEND; JPEG: its end marker), since Caffe
cannot decode a truncated image.
"""
import io
import os

from . import DatasetError, library

GREY_MODES = {"1", "L", "I", "F", "I;16", "I;16B", "I;16L", "I;16N"}
ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}


def native_channels(image):
    """Channels OpenCV's IMREAD_UNCHANGED gives for a Pillow image (opened, header read)."""
    mode = image.mode
    if mode in GREY_MODES:
        return 1
    if mode in ALPHA_MODES:
        return 4
    if image.format == "PNG" and mode in ("RGB", "P") and "transparency" in image.info:
        return 4
    return 3


def header(source, what):
    """(height, width, native channels, format) of an image file (a path) or encoded bytes."""
    Image = library("PIL.Image", "an image")
    fp = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    limit = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None  # only the header is read: a large image is no bomb here
    try:
        with Image.open(fp) as image:
            width, height = image.size
            channels, kind = native_channels(image), image.format
            if kind == "PNG":
                image.verify()  # walks the chunks to IEND, checking their CRCs: nothing is decoded
        if kind == "JPEG" and not _ends_with(source, b"\xff\xd9"):
            raise OSError("the JPEG has no end marker: truncated")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise DatasetError(f"{what}: not a readable image: {e}") from None
    finally:
        Image.MAX_IMAGE_PIXELS = limit
    if width <= 0 or height <= 0:
        raise DatasetError(f"{what}: the image is empty ({width}x{height})")
    return height, width, channels, kind


def _ends_with(source, tail):
    if isinstance(source, (bytes, bytearray)):
        return bytes(source[-len(tail):]) == tail or bytes(source.rstrip(b"\0")[-len(tail):]) == tail
    with open(source, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 64))
        return tail in f.read()
