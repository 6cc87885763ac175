"""Data layers sized as Caffe sizes them: from their parameters, and from the dataset on disk.

Every dataset is written here, in a temporary folder, the way Caffe's tools write them (tests/datasets.py);
every expected shape is derived by hand from BVLC 9b89154's sources, cited at each test:
DataTransformer::InferBlobShape (data_transformer.cpp:442-507), DataLayer::DataLayerSetUp
(data_layer.cpp:28-56), ImageDataLayer (image_data_layer.cpp:28-104), WindowDataLayer
(window_data_layer.cpp:36-175), HDF5DataLayer (hdf5_data_layer.cpp:69-127), io.cpp:73-90 and 166-189.
"""
import json
import os
import stat

import numpy as np
import pytest

import datasets as ds
from conftest import run_in_process
from protoaudit import InputError
from protoaudit.audit import audit, build_nets
from protoaudit.net.build import ShapesNeeded


def write_net(folder, layer, name="net.prototxt"):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(ds.net(layer))
    return path


def data_layer(source, batch=8, transform="", backend="LMDB", tops=("data", "label"), extra=""):
    tops_text = " ".join(f'top: "{t}"' for t in tops)
    backend_text = f" backend: {backend}" if backend else ""
    return (f'layer {{ name: "d" type: "Data" {tops_text} transform_param {{ {transform} }} '
            f'data_param {{ source: "{source}" batch_size: {batch}{backend_text} {extra} }} }}')


def shapes(path, **options):
    net = build_nets(path, **options)[0]
    return {net.blobs[i].name: net.blobs[i].shape for node in net.layers for i in node.tops}, net


def refused(path, *args, cwd=None):
    run = run_in_process(path, *args, cwd=cwd)
    assert run.returncode == 2, (run.returncode, run.stdout[-400:], run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A folder to run in, as Caffe runs in its root: relative dataset paths resolve from it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- 1. the layer's own parameters ------------------------------------------------------------------

def test_crop_fixes_height_and_width_and_three_channels_are_assumed(here):
    """No dataset on disk: crop_size x crop_size (InferBlobShape :471-472); the channels are the
    dataset's, so 3 (colour) is assumed, with the flag that changes it, in every format."""
    path = write_net(here, data_layer("nowhere_lmdb", 8, "crop_size: 20"))
    got, net = shapes(path)
    assert got["data"] == (8, 3, 20, 20) and got["label"] == (8,)
    [a] = net.assumptions
    assert "3 channels" in a.what and a.override == "--input data=8xCx20x20"
    text = run_in_process(path)
    assert text.returncode == 0, text.stderr
    assert "Assumed: " in text.stdout and "--input data=8xCx20x20" in text.stdout
    assert "the layer's parameters; 3 channels assumed" in text.stdout
    report = json.loads(run_in_process(path, "--format", "json").stdout)
    assert report["assumptions"][0]["override"] == "--input data=8xCx20x20"
    assert {(d["top"], tuple(d["shape"])) for d in report["data_shapes"]} >= {("data", (8, 3, 20, 20))}
    markdown = run_in_process(path, "--format", "markdown").stdout
    assert "3 channels" in markdown and "--input data=8xCx20x20" in markdown


def test_mean_values_give_the_channel_count(here):
    """One mean_value per channel (Transform's CHECK, data_transformer.cpp:68): 3 values, 3 channels,
    nothing assumed; a single value fits any count, so 3 is still assumed."""
    got, net = shapes(write_net(here, data_layer("no_such_db", 4, "crop_size: 5 mean_value: 1 mean_value: 2 mean_value: 3")))
    assert got["data"] == (4, 3, 5, 5) and net.assumptions == []
    got, net = shapes(write_net(here, data_layer("no_such_db", 4, "crop_size: 5 mean_value: 1 mean_value: 2"), "two.prototxt"))
    assert got["data"] == (4, 2, 5, 5) and net.assumptions == []
    got, net = shapes(write_net(here, data_layer("no_such_db", 4, "crop_size: 5 mean_value: 104"), "one.prototxt"))
    assert got["data"] == (4, 3, 5, 5) and len(net.assumptions) == 1


def test_force_color_and_force_gray_set_the_channels(here):
    """force_color decodes in colour (3), force_gray in grey (1) (io.cpp:182-184)."""
    got, net = shapes(write_net(here, data_layer("no_such_db", 2, "crop_size: 7 force_color: true")))
    assert got["data"] == (2, 3, 7, 7) and net.assumptions == []
    got, _ = shapes(write_net(here, data_layer("no_such_db", 2, "crop_size: 7 force_gray: true"), "g.prototxt"))
    assert got["data"] == (2, 1, 7, 7)
    with pytest.raises(InputError, match="both force_color and force_gray"):
        build_nets(write_net(here, data_layer("no_such_db", 2, "crop_size: 7 force_gray: true force_color: true"), "b.prototxt"))


def test_a_mean_file_gives_channels_and_the_stored_size(here):
    """Transform CHECKs that the record has the mean's channels, height and width
    (data_transformer.cpp:61-64): a readable mean file fixes the whole shape, the crop still wins."""
    ds.write_mean(str(here / "mean.binaryproto"), 1, 12, 10)
    got, net = shapes(write_net(here, data_layer("no_such_db", 3, 'mean_file: "mean.binaryproto"')))
    assert got["data"] == (3, 1, 12, 10) and net.assumptions == []
    got, _ = shapes(write_net(here, data_layer("no_such_db", 3, 'crop_size: 9 mean_file: "mean.binaryproto"'), "c.prototxt"))
    assert got["data"] == (3, 1, 9, 9)
    ds.write_mean(str(here / "shape.binaryproto"), 3, 6, 6, legacy=False)  # pycaffe's shape { dim } form
    got, _ = shapes(write_net(here, data_layer("no_such_db", 3, 'mean_file: "shape.binaryproto"'), "s.prototxt"))
    assert got["data"] == (3, 3, 6, 6)


def test_no_dataset_and_no_size_assumes_224_in_colour_and_strict_asks_for_input_with_what_is_known(here):
    """Nothing gives the size (no crop, no resize, no mean file, nothing beside the net): the image is
    assumed 224x224 (data.ASSUMED_SIZE), in 3 channels unless the three mean values already say 3,
    with the layer's batch; the label is one per image. --strict asks for the size instead."""
    path = write_net(here, data_layer("digits_train_lmdb", 64, "scale: 0.00390625"))
    got, net = shapes(path)
    assert got["data"] == (64, 3, 224, 224) and got["label"] == (64,)
    (said,) = net.assumptions
    assert "height and width 224x224 and 3 channels" in said.what and said.override == "--input data=64xCxHxW"
    with pytest.raises(ShapesNeeded) as e:
        build_nets(path, strict=True)
    message = str(e.value)
    assert "source 'digits_train_lmdb' is not found from" in message and "--root" in message
    assert "--input data=64xCxHxW" in message
    path = write_net(here, data_layer("nope", 64, "mean_value: 1 mean_value: 2 mean_value: 3"), "mv.prototxt")
    got, net = shapes(path)
    assert got["data"] == (64, 3, 224, 224) and "3 channels" not in net.assumptions[0].what
    assert "--input data=64x3xHxW" in refused(path, "--strict")


def test_caffes_example_database_names_give_their_records_shape_where_the_layer_agrees(here):
    """examples/mnist/create_mnist.sh writes mnist_train_lmdb with convert_mnist_data.cpp: 1x28x28
    records; create_cifar10.sh's cifar10_train_lmdb 3x32x32 (convert_cifar_data.cpp, kCIFARSize). A
    layer that crops 24 of them is 24 x 24. A crop larger than the records, or three mean values for
    MNIST's one channel, says the database was made otherwise: the layer is sized as for any missing
    database (crop x crop, 3 channels assumed), or asks for its size."""
    got, net = shapes(write_net(here, data_layer("examples/mnist/mnist_train_lmdb", 64, "scale: 0.00390625")))
    assert got["data"] == (64, 1, 28, 28) and got["label"] == (64,)
    assert [a.override for a in net.assumptions] == ["--input data=64x1x28x28 (your data's size)"]
    got, _ = shapes(write_net(here, data_layer("/x/cifar10_test_lmdb/", 10, "crop_size: 24"), "c.prototxt"))
    assert got["data"] == (10, 3, 24, 24)
    got, net = shapes(write_net(here, data_layer("cifar10_train_lmdb", 10, "crop_size: 227"), "big.prototxt"))
    assert got["data"] == (10, 3, 227, 227) and "3 channels (colour images)" in net.assumptions[0].what
    alone = here / "alone"  # in a folder of its own: the nets above, beside it, would give it their crop
    alone.mkdir()
    with pytest.raises(ShapesNeeded):
        build_nets(write_net(alone, data_layer("mnist_train_lmdb", 8, "mean_value: 1 mean_value: 2 mean_value: 3"),
                             "mv.prototxt"), strict=True)


def test_image_data_parameters(here):
    """ImageData: is_color gives 3 or 1 channels (io.cpp:76-77), new_height x new_width the size
    (io.cpp:83-84), the crop wins; with no list on disk these need nothing else."""
    layer = ('layer { name: "d" type: "ImageData" top: "data" top: "label" transform_param { crop_size: 11 } '
             'image_data_param { source: "nowhere.txt" batch_size: 5 new_height: 20 new_width: 30 is_color: false } }')
    got, net = shapes(write_net(here, layer))
    assert got["data"] == (5, 1, 11, 11) and got["label"] == (5,) and net.assumptions == []
    got, _ = shapes(write_net(here, layer.replace("crop_size: 11", ""), "n.prototxt"))
    assert got["data"] == (5, 1, 20, 30)
    with pytest.raises(InputError, match="crop_size 21 is larger"):
        build_nets(write_net(here, layer.replace("crop_size: 11", "crop_size: 21"), "big.prototxt"))


def test_window_data_channels_from_its_window_file(here):
    """WindowData shapes its data top (batch, channels, crop, crop) with the window file's channels
    (window_data_layer.cpp:104, 156); without the file, 3 are assumed."""
    layer = ('layer { name: "d" type: "WindowData" top: "data" top: "label" transform_param { crop_size: 16 } '
             'window_data_param { source: "windows.txt" batch_size: 6 } }')
    path = write_net(here, layer)
    got, net = shapes(path)
    assert got["data"] == (6, 3, 16, 16) and len(net.assumptions) == 1
    with open(here / "windows.txt", "w") as f:
        f.write("# 0\n/img/a.jpg\n1\n100\n80\n2\n1 0.9 1 2 30 40\n0 0.1 3 4 50 60\n")
    got, net = shapes(path)
    assert got["data"] == (6, 1, 16, 16) and net.assumptions == []


# --- 2. the dataset itself -----------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["LMDB", "LEVELDB", None])
def test_raw_records_give_the_shape_and_the_crop_wins(here, backend):
    """The first record's channels x height x width (InferBlobShape :460-474); LevelDB is the default
    backend (caffe.proto: backend = LEVELDB)."""
    recs = ds.records(3, 2, 30, 40)
    if backend == "LMDB":
        ds.write_lmdb(str(here / "db"), recs)
    else:
        ds.write_leveldb(str(here / "db"), recs)
    got, net = shapes(write_net(here, data_layer("db", 5, "", backend=backend)))
    assert got["data"] == (5, 2, 30, 40)
    origin = next(o for o in net.origins if o.top == "data").source
    assert origin == "dataset db (first record: 2x30x40, raw)"
    got, _ = shapes(write_net(here, data_layer("db", 5, "crop_size: 25", backend=backend), "crop.prototxt"))
    assert got["data"] == (5, 2, 25, 25)
    with pytest.raises(InputError, match="crop_size 31 is larger than the first record"):
        build_nets(write_net(here, data_layer("db", 5, "crop_size: 31", backend=backend), "big.prototxt"))


def test_leveldb_records_in_tables_and_in_the_log(here):
    """A fresh convert_imageset LevelDB keeps its records in the log; once opened by Caffe they are in
    tables (here compressed blocks too): the first key is found either way, in key order."""
    recs = [(b"%08d" % i, ds.datum(1, 10 + i, 12, i)) for i in (5, 3, 9, 4)]
    ds.write_leveldb(str(here / "log_db"), recs)
    ds.write_leveldb(str(here / "table_db"), recs, compact=True)
    for name in ("log_db", "table_db"):
        got, _ = shapes(write_net(here, data_layer(name, 2, "", backend="LEVELDB"), f"{name}.prototxt"))
        assert got["data"] == (2, 1, 13, 12)  # key 00000003: the smallest, written second


def test_leveldb_is_read_without_writing(here):
    """protoaudit never writes into a dataset: the LevelDB folder is left byte for byte as it was,
    and a read-only one is read (Caffe's own DB::Open would write a new log and MANIFEST)."""
    folder = str(here / "db")
    ds.write_leveldb(folder, ds.records(2, 3, 8, 8))
    ds.write_lmdb(str(here / "lm"), ds.records(2, 3, 8, 8))
    before = {(d, n): open(os.path.join(d, n), "rb").read() for d in (folder, str(here / "lm")) for n in os.listdir(d)}
    for d in (folder, str(here / "lm")):
        os.chmod(d, stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert shapes(write_net(here, data_layer("db", 2, "", backend="LEVELDB")))[0]["data"] == (2, 3, 8, 8)
        assert shapes(write_net(here, data_layer("lm", 2, ""), "l.prototxt"))[0]["data"] == (2, 3, 8, 8)
    finally:
        for d in (folder, str(here / "lm")):
            os.chmod(d, stat.S_IRWXU)
    after = {(d, n): open(os.path.join(d, n), "rb").read() for d in (folder, str(here / "lm")) for n in os.listdir(d)}
    assert after == before


@pytest.mark.parametrize("fmt,channels,flags,want", [
    ("PNG", 3, "", 3), ("PNG", 1, "", 1), ("JPEG", 3, "", 3), ("JPEG", 1, "", 1),
    ("PNG", 1, "force_color: true", 3), ("PNG", 3, "force_gray: true", 1),
])
def test_encoded_records_are_decoded_as_opencv_does(here, fmt, channels, flags, want):
    """An encoded Datum is decoded: natively (IMREAD_UNCHANGED, io.cpp:171) it keeps the image's
    channels; force_color/force_gray decode in colour or grey (io.cpp:182-184)."""
    ds.write_lmdb(str(here / "db"), ds.records(2, channels, 33, 44, encoded=fmt))
    got, net = shapes(write_net(here, data_layer("db", 4, f"crop_size: 32 {flags}")))
    assert got["data"] == (4, want, 32, 32)
    origin = next(o for o in net.origins if o.top == "data").source
    assert f"first record: {want}x33x44, encoded {fmt}" in origin


def test_png_with_alpha_keeps_four_channels(here):
    """OpenCV's PNG decoder reads RGBA as 4 channels under IMREAD_UNCHANGED."""
    d = ds.SCHEMA.message("Datum")(encoded=True, data=ds.image_bytes(4, 9, 9, "PNG", mode="RGBA"))
    ds.write_lmdb(str(here / "db"), [(b"0", d.SerializeToString())])
    assert shapes(write_net(here, data_layer("db", 1, "")))[0]["data"] == (1, 4, 9, 9)


def test_dataset_and_mean_file_must_agree(here):
    """Transform CHECKs the mean's shape against the record's (data_transformer.cpp:62-64) and the
    number of mean values against the channels (:68)."""
    ds.write_lmdb(str(here / "db"), ds.records(2, 3, 16, 16))
    ds.write_mean(str(here / "mean.binaryproto"), 3, 16, 16)
    got, net = shapes(write_net(here, data_layer("db", 2, 'crop_size: 8 mean_file: "mean.binaryproto"')))
    assert got["data"] == (2, 3, 8, 8)
    ds.write_mean(str(here / "bad.binaryproto"), 3, 15, 16)
    with pytest.raises(InputError, match="the mean file is 3x15x16 but the first record"):
        build_nets(write_net(here, data_layer("db", 2, 'mean_file: "bad.binaryproto"'), "b.prototxt"))
    with pytest.raises(InputError, match="2 mean_value entries for 3 channels"):
        build_nets(write_net(here, data_layer("db", 2, "mean_value: 1 mean_value: 2"), "v.prototxt"))


def test_image_list(here):
    """ImageData reads the image the list's first line names, under root_folder, decodes it in
    colour or grey, resizes it to new_height x new_width, crops it."""
    names = ds.write_images(str(here / "imgs"), 3, 3, 50, 70)
    ds.write_list(str(here / "list.txt"), [f"{n} {i}" for i, n in enumerate(names)])
    layer = ('layer { name: "d" type: "ImageData" top: "data" top: "label" transform_param { %s } '
             'image_data_param { source: "list.txt" root_folder: "imgs/" batch_size: 4 %s } }')
    got, net = shapes(write_net(here, layer % ("", "")))
    assert got["data"] == (4, 3, 50, 70)
    assert "image imgs/img0.png (70x50 PNG, first in list.txt)" == next(o.source for o in net.origins if o.top == "data")
    assert shapes(write_net(here, layer % ("crop_size: 40", "is_color: false"), "c.prototxt"))[0]["data"] == (4, 1, 40, 40)
    assert shapes(write_net(here, layer % ("", "new_height: 64 new_width: 80"), "r.prototxt"))[0]["data"] == (4, 3, 64, 80)
    with pytest.raises(InputError, match="crop_size 51 is larger than the image"):
        build_nets(write_net(here, layer % ("crop_size: 51", ""), "big.prototxt"))


def test_hdf5_several_tops(here):
    """HDF5Data: each top is (batch_size,) + the same-named dataset's shape after its rows
    (hdf5_data_layer.cpp:115-125), from the list's first file."""
    ds.write_h5(str(here / "a.h5"), data=np.zeros((7, 3, 5, 4), "float32"), label=np.zeros(7, "float32"),
                weight=np.zeros((7, 6), "float64"))
    ds.write_list(str(here / "list.txt"), ["a.h5", "missing_second.h5"])
    layer = ('layer { name: "d" type: "HDF5Data" top: "data" top: "label" top: "weight" '
             'hdf5_data_param { source: "list.txt" batch_size: 2 } }')
    got, net = shapes(write_net(here, layer))
    assert (got["data"], got["label"], got["weight"]) == ((2, 3, 5, 4), (2,), (2, 6))
    ds.write_h5(str(here / "b.h5"), data=np.zeros((7, 3), "float32"), label=np.zeros(6, "float32"))
    ds.write_list(str(here / "list.txt"), ["b.h5"])
    with pytest.raises(InputError, match="has 6 rows"):
        build_nets(write_net(here, layer.replace(' top: "weight"', ""), "rows.prototxt"))


# --- path resolution --------------------------------------------------------------------------------

def test_paths_resolve_from_cwd_then_root_then_the_net_files_folders(tmp_path, monkeypatch):
    caffe = tmp_path / "caffe"
    (caffe / "examples" / "mnist").mkdir(parents=True)
    ds.write_lmdb(str(caffe / "examples" / "mnist" / "train_lmdb"), ds.records(2, 1, 28, 28))
    path = write_net(str(caffe / "examples" / "mnist"), data_layer("examples/mnist/train_lmdb", 64, ""))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    got, net = shapes(path)  # found from a folder above the net file: the Caffe root
    assert got["data"] == (64, 1, 28, 28)
    assert "a folder above the net file" in next(o.source for o in net.origins if o.top == "data")
    moved = tmp_path / "moved.prototxt"
    moved.write_text(open(path).read())
    with pytest.raises(ShapesNeeded):
        build_nets(str(moved), strict=True)
    got, net = shapes(str(moved), root=str(caffe))
    assert got["data"] == (64, 1, 28, 28) and "--root" in next(o.source for o in net.origins if o.top == "data")
    # a bare name is looked for beside the net file only, not in every folder above it
    ds.write_lmdb(str(tmp_path / "bare_lmdb"), ds.records(1, 1, 5, 5))
    deep = caffe / "models" / "deep.prototxt"
    deep.parent.mkdir()
    deep.write_text(open(path).read().replace("examples/mnist/train_lmdb", "bare_lmdb"))
    with pytest.raises(ShapesNeeded):
        build_nets(str(deep), strict=True)


# --- failures: one line, exit 2 -------------------------------------------------------------------------

def lmdb_net(here, make):
    folder = here / "db"
    folder.mkdir()
    make(folder)
    return write_net(here, data_layer("db", 4, ""))


@pytest.mark.parametrize("make,words", [
    (lambda f: (f / "data.mdb").write_bytes(b"\0garbage" * 4096), "not an LMDB data file"),
    (lambda f: ds.write_lmdb(str(f), []), "the LMDB is empty"),
    (lambda f: (ds.write_lmdb(str(f), ds.records(40, 3, 64, 64)),
                os.truncate(str(f / "data.mdb"), os.path.getsize(str(f / "data.mdb")) // 2)), "cut short"),
    (lambda f: ds.write_lmdb(str(f), [(b"k", b"\xff\xff not a datum")]), "not a Caffe Datum"),
    (lambda f: ds.write_leveldb(str(f), ds.records(1, 1, 2, 2)), "set data_param { backend: LEVELDB }"),
])
def test_unreadable_lmdb(here, make, words):
    msg = refused(lmdb_net(here, make), cwd=here)
    assert words in msg and "layer 'd'" in msg, msg


@pytest.mark.parametrize("make,words", [
    (lambda f: (ds.write_leveldb(str(f), ds.records(2, 1, 4, 4)),
                [open(f / n, "wb").write(b"\x01" * 100) for n in os.listdir(f) if n.startswith("MANIFEST")]),
     "corrupt LevelDB"),
    (lambda f: ds.write_leveldb(str(f), []), "the LevelDB is empty"),
    (lambda f: ds.write_lmdb(str(f), ds.records(1, 1, 2, 2)), "set data_param { backend: LMDB }"),
])
def test_unreadable_leveldb(here, make, words):
    folder = here / "db"
    folder.mkdir()
    make(folder)
    msg = refused(write_net(here, data_layer("db", 4, "", backend=None)), cwd=here)
    assert words in msg, msg


def image_data_net(here, source="list.txt", extra=""):
    return write_net(here, 'layer { name: "d" type: "ImageData" top: "data" top: "label" '
                     f'image_data_param {{ source: "{source}" batch_size: 2 {extra} }} }}')


def test_truncated_image(here):
    data = ds.image_bytes(3, 40, 40, "PNG")
    (here / "cut.png").write_bytes(data[:len(data) // 2])
    ds.write_list(str(here / "list.txt"), ["cut.png 0"])
    assert "not a readable image" in refused(image_data_net(here), cwd=here)
    jpeg = ds.image_bytes(3, 40, 40, "JPEG")
    (here / "cut.jpg").write_bytes(jpeg[:-200])
    ds.write_list(str(here / "list.txt"), ["cut.jpg 0"])
    assert "truncated" in refused(image_data_net(here), cwd=here)


def test_list_naming_a_missing_file(here):
    ds.write_list(str(here / "list.txt"), ["gone.png 0"])
    msg = refused(image_data_net(here), "--strict", cwd=here)
    assert "the first image that 'list.txt' names, 'gone.png' is not found" in msg and "--input data=2x3xHxW" in msg
    # the parameters fix the shape: the missing images do not matter
    assert shapes(image_data_net(here, extra="new_height: 8 new_width: 9"))[0]["data"] == (2, 3, 8, 9)


def test_empty_list(here):
    ds.write_list(str(here / "list.txt"), [])
    assert "is empty" in refused(image_data_net(here), cwd=here)


def test_a_list_of_ten_million_lines_is_not_read_whole(here):
    """Caffe keeps every line (lines_); protoaudit reads the first, and estimates the count from a
    sample and the file's size."""
    names = ds.write_images(str(here), 1, 3, 6, 6)
    with open(here / "list.txt", "wb") as f:
        f.write(f"{names[0]} 1\n".encode() * 10_000_000)
    result = audit(image_data_net(here), mode="cpu", solver_type="none")
    [lines] = [b for b in result.buffers if b.owner == "d.lines_"]
    assert "estimated" in lines.note
    assert abs(int(lines.note.split()[0].replace(",", "")) - 10_000_000) <= 10_000


def test_hdf5_failures(here):
    layer = 'layer { name: "d" type: "HDF5Data" top: "data" hdf5_data_param { source: "list.txt" batch_size: 2 } }'
    path = write_net(here, layer)
    (here / "bad.h5").write_bytes(b"not hdf5" * 100)
    ds.write_list(str(here / "list.txt"), ["bad.h5"])
    assert "not a readable HDF5 file" in refused(path, cwd=here)
    ds.write_h5(str(here / "ok.h5"), other=np.zeros((3, 2), "float32"))
    ds.write_list(str(here / "list.txt"), ["ok.h5"])
    assert "has no dataset 'data'" in refused(path, cwd=here)
    ds.write_list(str(here / "list.txt"), ["gone.h5"])
    msg = refused(path, "--strict", cwd=here)  # without it, the top is assumed an image (test_assumed_images)
    # each top is batch_size rows of its dataset: the flag carries the batch, 2
    assert "'gone.h5' is not found" in msg and "--input data=2xCxHxW" in msg


def test_corrupt_mean_file(here):
    (here / "m.binaryproto").write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
    msg = refused(write_net(here, data_layer("no_such_db", 2, 'crop_size: 3 mean_file: "m.binaryproto"')), cwd=here)
    assert "not a binary BlobProto" in msg


# --- without the datasets extra --------------------------------------------------------------------------

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('lmdb', 'plyvel', 'h5py', 'PIL', 'cramjam'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
from protoaudit.cli import main
sys.exit(main())
"""


def run_without_extra(*args, cwd):
    import subprocess
    import sys

    from conftest import ROOT

    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", BLOCK, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=60)


def test_without_the_extra(here):
    """The package imports and audits without lmdb, plyvel, h5py, Pillow or cramjam: a net whose
    parameters fix its shape needs none; a dataset on disk that only they read is asked for, naming
    the extra; one whose shape the parameters fix is audited, noting it was not read."""
    path = write_net(here, data_layer("nowhere", 8, "crop_size: 20"))
    run = run_without_extra(path, cwd=here)
    assert run.returncode == 0, run.stderr
    assert "3 channels assumed" in run.stdout
    ds.write_lmdb(str(here / "db"), ds.records(1, 1, 5, 5))
    run = run_without_extra(write_net(here, data_layer("db", 8, ""), "d.prototxt"), cwd=here)
    assert run.returncode == 2 and "pip install 'protoaudit[datasets]'" in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    run = run_without_extra(write_net(here, data_layer("db", 8, "crop_size: 4"), "c.prototxt"), cwd=here)
    assert run.returncode == 0, run.stderr
    assert "was not read" in run.stdout and "protoaudit[datasets]" in run.stdout


def test_caffes_example_hdf5_lists_give_their_datasets_where_the_tops_are_theirs(here):
    """examples/brewing-logreg.ipynb (BVLC 9b89154, cells 3 and 7) writes train.h5 and test.h5 from
    sklearn's make_classification(n_samples=10000, n_features=4), split by train_test_split's default
    quarter: 'data' 7,500 x 4 float64 and 'label' 7,500 float32 (2,500 rows in test.h5), train.txt
    naming train.h5 twice. A layer reading it holds the file as floats (hdf_blobs_, util/hdf5.cpp):
    7,500 x (4 + 1) x 4 = 150,000 bytes, 2,500 x 5 x 4 = 50,000 for the test list; float64 data needs
    HDF5's conversion buffer. Tops of other names are not that file's datasets: they are asked for."""
    from protoaudit.memory.buffers import net_buffers

    layer = ('layer {{ name: "d" type: "HDF5Data" top: "data" top: "label" '
             'hdf5_data_param {{ source: "examples/hdf5_classification/data/{}.txt" batch_size: 10 }} }}')
    for split, held in (("train", 150_000), ("test", 50_000)):
        got, net = shapes(write_net(here, layer.format(split), f"{split}.prototxt"))
        assert got["data"] == (10, 4) and got["label"] == (10,)
        (said,) = net.assumptions
        assert "brewing-logreg.ipynb" in said.what and said.override.startswith("--input data=10x4 --input label=10")
        buffers = net_buffers(net)
        assert sum(b.bytes for b in buffers if b.owner.endswith(".hdf_blobs_")) == held
        assert any(b.owner.endswith("HDF5 conversion buffer") for b in buffers)
    with pytest.raises(ShapesNeeded):
        build_nets(write_net(here, layer.format("train").replace('top: "label"', 'top: "weight"'), "other.prototxt"),
                   strict=True)


def test_sphereface_s_aligned_casia_list_gives_its_image_size(here):
    """wy1iu/sphereface f20b130: preprocess/code/face_align_demo.m aligns every face to imgSize =
    [112, 96] (rows, columns) and saves it as a colour JPEG; train/code/get_list.m lists them as
    data/CASIA-WebFace-112X96.txt, the source of its nets. Absent, an ImageData layer naming that list
    is 112 x 96 colour, cropped as it says; is_color false (grey) or new_height/new_width are not that
    list's images, and are sized as before."""
    layer = ('layer { name: "d" type: "ImageData" top: "data" top: "label" transform_param { %s } '
             'image_data_param { source: "data/CASIA-WebFace-112X96.txt" batch_size: 16 %s } }')
    got, net = shapes(write_net(here, layer % ("mirror: true", "")))
    assert got["data"] == (16, 3, 112, 96)
    (said,) = net.assumptions
    assert "SphereFace" in said.what and said.override.startswith("--input data=16x3x112x96")
    got, _ = shapes(write_net(here, layer % ("crop_size: 96", ""), "crop.prototxt"))
    assert got["data"] == (16, 3, 96, 96)
    alone = here / "alone"  # in a folder of its own: the crop.prototxt beside it would give it its crop
    alone.mkdir()
    with pytest.raises(ShapesNeeded):
        build_nets(write_net(alone, layer % ("", "is_color: false"), "grey.prototxt"), strict=True)


def test_a_check_behind_a_missing_datasets_label_says_the_label_was_bvlcs(here):
    """BVLC's DataLayer gives one label per record (data_layer.cpp: label_shape(1, batch_size)); a
    fork's may keep more (alexgkendall/caffe-posenet: the record's float_data, its PoseNet nets
    slicing the label on axis 1). With the dataset absent, a Slice of the label on axis 1 fails Caffe's
    CHECK in BVLC's Caffe, and the message says the label's shape is BVLC's, not a fault of the file."""
    net = data_layer("missing_lmdb", 4, "crop_size: 8") + (
        ' layer { name: "s" type: "Slice" bottom: "label" top: "xyz" top: "wpqr" '
        'slice_param { slice_dim: 1 slice_point: 3 } }')
    message = refused(write_net(here, net))
    assert "top 'label' of layer 'd' is 4, one label per record as BVLC's Data layer makes it" in message
    assert "--input label=4xK" in message and "Caffe stops here too" not in message
    run = run_in_process(write_net(here, net, "given.prototxt"), "--input", "label=4x7")
    assert run.returncode == 0, run.stderr
