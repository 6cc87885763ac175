"""Write the small datasets samples/lenet_lmdb.prototxt reads: MNIST-shaped LMDBs (1x28x28 grey
images, raw Datums as Caffe's convert_mnist_data writes them) and the mean file.

    pip install 'protoaudit[datasets]' numpy
    python samples/make_dataset.py              # writes samples/data/
    protoaudit samples/lenet_lmdb.prototxt      # run from the repository's root, as Caffe runs from its own

Random pixels: only the shapes matter to protoaudit. Usage: make_dataset.py [FOLDER] (default samples/data).
"""
import os
import sys

import lmdb
import numpy as np

from protoaudit.read.schema import load_schema

SCHEMA = load_schema("bvlc")


def write_lmdb(path, count, seed):
    rng = np.random.default_rng(seed)
    env = lmdb.open(path, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for i in range(count):
            datum = SCHEMA.message("Datum")(channels=1, height=28, width=28, label=i % 10,
                                            data=rng.integers(0, 256, 28 * 28, dtype=np.uint8).tobytes())
            txn.put(b"%08d" % i, datum.SerializeToString())
    env.close()


def write_mean(path):
    blob = SCHEMA.message("BlobProto")(num=1, channels=1, height=28, width=28)
    blob.data.extend([33.3] * (28 * 28))
    with open(path, "wb") as f:
        f.write(blob.SerializeToString())


def main(folder):
    os.makedirs(folder, exist_ok=True)
    write_lmdb(os.path.join(folder, "mnist_train_lmdb"), 100, seed=1)
    write_lmdb(os.path.join(folder, "mnist_test_lmdb"), 20, seed=2)
    write_mean(os.path.join(folder, "mnist_mean.binaryproto"))
    print(f"wrote {folder}/mnist_train_lmdb, mnist_test_lmdb and mnist_mean.binaryproto")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("samples", "data"))
