"""A mean file's shape (a binary BlobProto, as DataTransformer's ReadProtoFromBinaryFileOrDie reads it).

Only the small fields are parsed, with the compiled schema's BlobProto: the wire format is walked
field by field and the float payloads (data, diff, double_data, double_diff: a 256x256x3 mean is
768 KB) are skipped by their length, so a large mean is never read into memory.
"""
import os

from google.protobuf.message import DecodeError

from . import DatasetError

PAYLOADS = {5: 4, 6: 4, 8: 8, 9: 8}  # field number -> bytes per value (data, diff, double_data, double_diff)
LIMIT = 1 << 20  # bytes of small fields: a BlobProto's shape fields take a few dozen


def _varint(f):
    result = shift = 0
    raw = b""
    while True:
        b = f.read(1)
        if not b or shift > 63:
            raise ValueError("truncated")
        raw += b
        result |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return result, raw
        shift += 7


def blob_shape(path):
    """(shape tuple as Blob::FromProto makes it, number of stored values) of the BlobProto at `path`."""
    from ..schema import load_schema

    size = os.path.getsize(path)
    small, stored = b"", {}
    try:
        with open(path, "rb") as f:
            while f.tell() < size:
                key, raw = _varint(f)
                field, wire = key >> 3, key & 7
                if wire == 2:
                    length, raw_len = _varint(f)
                    if f.tell() + length > size:
                        raise ValueError("a field runs past the end of the file")
                    if field in PAYLOADS:
                        stored[field] = stored.get(field, 0) + length // PAYLOADS[field]
                        f.seek(length, os.SEEK_CUR)
                        continue
                    small += raw + raw_len + f.read(length)
                elif wire == 0:
                    small += raw + _varint(f)[1]
                elif wire in (1, 5):
                    width = 8 if wire == 1 else 4
                    if field in PAYLOADS:
                        stored[field] = stored.get(field, 0) + 1
                        f.seek(width, os.SEEK_CUR)
                        continue
                    small += raw + f.read(width)
                else:
                    raise ValueError(f"wire type {wire}")
                if len(small) > LIMIT:
                    raise ValueError("not a BlobProto")
        blob = load_schema("bvlc").message("BlobProto").FromString(small)
    except (ValueError, DecodeError) as e:
        raise DatasetError(f"{path}: not a binary BlobProto mean file ({e})") from None
    if any(blob.HasField(n) for n in ("num", "channels", "height", "width")):
        shape = (blob.num, blob.channels, blob.height, blob.width)
    else:
        shape = tuple(blob.shape.dim)
    count = 1
    for d in shape:
        count *= d
    values = stored.get(8, 0) or stored.get(5, 0)
    if not shape or count <= 0 or values != count:
        raise DatasetError(f"{path}: the mean's shape {'x'.join(map(str, shape)) or '(none)'} does not match its "
                           f"{values:,} stored values (Blob::FromProto checks they agree)")
    return shape
