"""Small Caffe datasets written for the tests, in a temporary folder, the way Caffe's tools write them.

convert_imageset writes Datums (raw uint8 pixels, channels x height x width, or the image file's own
bytes with encoded: true) under keys "%08d_name" into an LMDB or a LevelDB; compute_image_mean writes
a BlobProto with num/channels/height/width; ImageData reads "path label" lines; HDF5Data a list of
.h5 files with one dataset per top.
"""
import io
import os

import numpy as np

from protoaudit.read.schema import load_schema

SCHEMA = load_schema("bvlc")


def pixels(channels, height, width, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (height, width, channels), dtype=np.uint8)


def image_bytes(channels, height, width, fmt="PNG", seed=0, mode=None):
    from PIL import Image

    a = pixels(channels, height, width, seed)
    image = Image.fromarray(a[:, :, 0] if channels == 1 else a, mode=mode)
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


def datum(channels, height, width, label=0, encoded=None, seed=0):
    """A serialized Datum: raw pixels, or (encoded="PNG"/"JPEG") the image file's bytes."""
    d = SCHEMA.message("Datum")()
    d.label = label
    if encoded:
        d.encoded = True
        d.data = image_bytes(channels, height, width, encoded, seed)
    else:
        d.channels, d.height, d.width = channels, height, width
        d.data = pixels(channels, height, width, seed).transpose(2, 0, 1).tobytes()
    return d.SerializeToString()


def records(n, channels, height, width, encoded=None):
    return [(b"%08d_img%d" % (i, i), datum(channels, height, width, i, encoded, seed=i)) for i in range(n)]


def write_lmdb(path, recs):
    import lmdb

    env = lmdb.open(path, map_size=1 << 30)
    with env.begin(write=True) as txn:
        for key, value in recs:
            txn.put(key, value)
    env.close()
    return path


def write_leveldb(path, recs, compact=False):
    """A LevelDB as convert_imageset leaves it (its records in the log), or after Caffe has opened it
    once (compacted into tables)."""
    import plyvel

    db = plyvel.DB(path, create_if_missing=True)
    for key, value in recs:
        db.put(key, value)
    if compact:
        db.compact_range()
    db.close()
    return path


def write_mean(path, channels, height, width, legacy=True):
    """compute_image_mean's BlobProto (num/channels/height/width), or pycaffe's (shape { dim })."""
    b = SCHEMA.message("BlobProto")()
    if legacy:
        b.num, b.channels, b.height, b.width = 1, channels, height, width
    else:
        b.shape.dim.extend([1, channels, height, width])
    b.data.extend([0.5] * (channels * height * width))
    with open(path, "wb") as f:
        f.write(b.SerializeToString())
    return path


def write_images(folder, n, channels, height, width, fmt="PNG"):
    os.makedirs(folder, exist_ok=True)
    names = []
    for i in range(n):
        name = f"img{i}.{fmt.lower()}"
        with open(os.path.join(folder, name), "wb") as f:
            f.write(image_bytes(channels, height, width, fmt, seed=i))
        names.append(name)
    return names


def write_list(path, lines):
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def write_h5(path, **datasets):
    import h5py

    with h5py.File(path, "w") as f:
        for name, array in datasets.items():
            f.create_dataset(name, data=array)
    return path


def net(layer, tail='layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" '
                    'inner_product_param { num_output: 2 } }'):
    """A net file's text: the data layer, then a consumer of its data top."""
    return f'name: "t"\n{layer}\n{tail}\n'
