"""A Caffe Datum (a dataset record) as DataTransformer::InferBlobShape sees it (data_transformer.cpp:442-476).

A raw record gives channels x height x width itself; an encoded one (`encoded: true`, the bytes
of an image file) is decoded by OpenCV, so its shape is the image's: its own channels, or 3 under
force_color and 1 under force_gray (only the header is read, see image_file).
"""
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from . import DatasetError
from .image_file import header


@dataclass(frozen=True)
class Record:
    channels: int
    height: int
    width: int
    encoding: str  # "raw" or the image format ("PNG", "JPEG", ...)
    data_bytes: int = 0  # the record's `data` (raw pixels, or the encoded image)
    float_values: int = 0  # its `float_data` entries

    @property
    def shape(self):
        return (self.channels, self.height, self.width)

    def describe(self):
        how = "raw" if self.encoding == "raw" else f"encoded {self.encoding}"
        return f"{self.channels}x{self.height}x{self.width}, {how}"


def parse(value, what, force_color=False, force_gray=False):
    """The Record of a serialized Datum (`value`), decoded as Caffe's transformer decodes it."""
    from ..schema import load_schema

    Datum = load_schema("bvlc").message("Datum")
    try:
        datum = Datum.FromString(value)
    except DecodeError as e:
        raise DatasetError(f"{what}: the first record is not a Caffe Datum ({e})") from None
    if datum.encoded:
        if not datum.data:
            raise DatasetError(f"{what}: the first record is marked encoded but holds no image bytes")
        height, width, channels, kind = header(datum.data, f"{what}: the first record's image")
        if force_color or force_gray:
            channels = 3 if force_color else 1
        return Record(channels, height, width, kind, len(datum.data), len(datum.float_data))
    c, h, w = datum.channels, datum.height, datum.width
    if c <= 0 or h <= 0 or w <= 0:
        raise DatasetError(f"{what}: the first record's shape is {c}x{h}x{w} (Caffe checks channels > 0)")
    stored = len(datum.data) or len(datum.float_data)
    if stored != c * h * w:
        raise DatasetError(f"{what}: the first record says {c}x{h}x{w} = {c * h * w:,} values but holds "
                           f"{stored:,}")
    return Record(c, h, w, "raw", len(datum.data), len(datum.float_data))
