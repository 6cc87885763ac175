"""Hostile inputs: absurd sizes, huge and endless files, pipes and devices, self-reference, deep
nesting, a dataset folder of a million entries. Each is answered within seconds, with bounded
memory, never with a traceback: a report (exit status 0 or 1) or one line naming the file and what
to do (exit status 2).

Every case runs the command in a process of its own, as a user does, and measures that process's
peak resident memory (its VmHWM as it ends).
"""
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

import pytest

import datasets
from conftest import DATA, ROOT

GiB = 2**30
MEMORY = 1 * GiB  # the ceiling for every case but the 100,000-layer net
SECONDS = 20  # wall clock, on a shared 2-core machine; every case takes well under it when idle
LENET = os.path.join(DATA, "nets", "lenet_train_test.prototxt")
LENET_INPUTS = ["--input", "data=64x1x28x28", "--input", "label=64"]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak: int  # bytes of resident memory at most


# `python -m protoaudit ARGS`, then the process's own high-water mark of resident memory (VmHWM,
# since exec): the rusage of a child also counts the memory of the test process it was forked from.
MEASURED = """
import os, runpy
try:
    runpy.run_module("protoaudit", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as f:
        peak = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(os.environ["PROTOAUDIT_TEST_PEAK"], "w") as f:
        f.write(peak)
"""


def run(*args, cwd, timeout=120):
    """`python -m protoaudit ARGS` in `cwd`, with its wall time and its peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = os.path.join(tmp, "peak")
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PROTOAUDIT_TEST_PEAK=peak_file)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", MEASURED, *map(str, args)], capture_output=True,
                              stdin=subprocess.DEVNULL, cwd=cwd, env=env, timeout=timeout)
        seconds = time.perf_counter() - start
        with open(peak_file) as f:
            peak = int(f.read()) * 1024
    return Run(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"),
               seconds, peak)


def answered(result, seconds=SECONDS, memory=MEMORY):
    """The run ended by itself in time and memory, with a report or one line of refusal."""
    assert result.returncode in (0, 1, 2), (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    assert result.seconds < seconds, f"{result.seconds:.1f} s"
    assert result.peak < memory, f"{result.peak / 2**20:.0f} MiB"
    return result


def refused(result, *words, seconds=SECONDS, memory=MEMORY):
    """The one line of a refusal, holding each of `words`."""
    answered(result, seconds, memory)
    assert result.returncode == 2, result.stdout[-500:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("protoaudit: ") and lines[0].endswith(")"), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def write(path, text):
    path.write_text(text)
    return path


def layer(name, type_, bottoms=(), tops=(), body=""):
    return (f'layer {{ name: "{name}" type: "{type_}" ' + "".join(f'bottom: "{b}" ' for b in bottoms)
            + "".join(f'top: "{t}" ' for t in tops) + body + " }\n")


def data(*dims, name="data"):
    d = " ".join(f"dim: {x}" for x in dims)
    return layer(name, "Input", tops=[name], body=f"input_param {{ shape {{ {d} }} }}")


# --- absurd sizes ------------------------------------------------------------------------------------
# Python's integers are exact, so a product past int64 is only a large number; Caffe refuses any blob
# of more than INT_MAX elements (blob.cpp:34) or 32 axes (blob.cpp:24), and so does protoaudit.
BIG = 2**62
CONV = data(1, 3, 8, 8) + layer("conv", "Convolution", ["data"], ["conv"], "convolution_param { num_output: 4 "
                                                                            "kernel_size: 3 }")


@pytest.mark.parametrize("text, args, words", [
    (data(BIG, BIG), [], ["net.prototxt:2: layer 'data'", f"{BIG * BIG:,} elements"]),  # 2**124
    (layer("data", "DummyData", tops=["data"], body="dummy_data_param { num: 4294967295 channels: 4294967295 "
                                                    "height: 4294967295 width: 4294967295 }"), [],
     ["net.prototxt:2: layer 'data'", f"{4294967295 ** 4:,} elements"]),
    (data(1, 3, 8, 8) + layer("conv", "Convolution", ["data"], ["conv"], "convolution_param { num_output: 4 "
                                                                         "kernel_size: 4294967295 pad: 2147483647 }"),
     [], ["net.prototxt:3: layer 'conv': parameter 0", f"{4 * 3 * 4294967295 ** 2:,} elements"]),
    (CONV, ["--input", f"data={BIG}x{BIG}x3x3"], ["net.prototxt:2: layer 'data'", f"{BIG * BIG * 9:,} elements"]),
    (CONV, ["--batch", BIG], ["net.prototxt:2: layer 'data'", f"{BIG * 3 * 8 * 8:,} elements"]),
    (data(*[1] * 40), [], ["net.prototxt:2: layer 'data'", "40 axes", "at most 32"]),
    (CONV, ["--input", "data=" + "x".join(["1"] * 50_000)], ["--input 'data=1x1x1", "at most 32 axes"]),
], ids=["dims-2-62", "legacy-dims-uint32-max", "param-over-int-max", "input-2-62", "batch-2-62", "40-axes",
        "input-of-50000-axes"])
def test_absurd_sizes_are_refused_with_the_figure(tmp_path, text, args, words):
    write(tmp_path / "net.prototxt", 'name: "absurd"\n' + text)
    refused(run("net.prototxt", *args, cwd=tmp_path), *words)


def test_an_absurd_size_that_caffe_accepts_is_written_in_its_unit(tmp_path):
    """--context 2**62 bytes: a figure of 19 digits, written in EiB rather than as 4294967296 GiB."""
    write(tmp_path / "net.prototxt", 'name: "n"\n' + CONV)
    result = answered(run("net.prototxt", "--context", f"{BIG}B", cwd=tmp_path))
    assert result.returncode == 0 and "Total: 4 EiB (4,611,686,018,427,3" in result.stdout


def test_an_absurd_card_says_what_caps_the_largest_batch(tmp_path):
    """--gpu-mem 99999999T. LeNet's largest top per sample is conv1's, 20 x 24 x 24 = 11,520 floats,
    so Caffe refuses batch INT_MAX // 11,520 + 1 = 186,414 (2,147,489,280 elements) on any card: the
    report names the limit and the layer rather than a bare 186413."""
    result = answered(run(LENET, *LENET_INPUTS, "--gpu-mem", "99999999T", cwd=tmp_path))
    assert result.returncode == 0 and "Largest batch that fits: 186413 (audited at batch 64)." in result.stdout
    assert ("Capped by Caffe's blob-size limit (INT_MAX elements), not by the card: batch 186,414 is refused "
            "(layer 'conv1': top 'conv1' would hold 2,147,489,280 elements") in result.stdout
    as_json = json.loads(answered(run(LENET, *LENET_INPUTS, "--gpu-mem", "99999999T", "--format", "json",
                                      cwd=tmp_path)).stdout)
    assert as_json["fit"]["largest_batch_limit"].startswith("Capped by Caffe's blob-size limit")


def test_an_absurd_card_for_a_tiny_net_says_where_the_search_stops(tmp_path):
    """A 1x3x8x8 input and a 4x6x6 convolution: 336 floats a sample, far from INT_MAX at batch 2**20,
    where protoaudit stops looking."""
    write(tmp_path / "net.prototxt", 'name: "n"\n' + CONV)
    result = answered(run("net.prototxt", "--gpu-mem", "99999999T", cwd=tmp_path))
    assert "Largest batch that fits: 1048576" in result.stdout
    assert "Capped by protoaudit, not by the card: it looks no further than batch 1,048,576." in result.stdout


def test_a_card_that_caps_the_batch_says_nothing_more(tmp_path):
    """On a 1 GiB card LeNet's batch is capped by the card (326 MiB at batch 64, 300 MiB of it the CUDA
    context), thousands of batches below Caffe's blob limit of 186,413: no 'Capped' line."""
    result = answered(run(LENET, *LENET_INPUTS, "--gpu-mem", "1G", cwd=tmp_path))
    assert "Largest batch that fits:" in result.stdout and "Capped" not in result.stdout
    assert 64 < int(result.stdout.split("Largest batch that fits: ")[1].split()[0]) < 186413


# --- many layers, many tops, deep nesting ----------------------------------------------------------------
def test_10000_tops_on_one_layer(tmp_path):
    """A Slice into 10,000 tops joined again by a Concat of 10,000 bottoms, a DummyData of 10,000 tops,
    and one top read by 10,000 layers (Caffe's Split of 10,000 tops): the text report's rows stay as
    wide as a screen, not as wide as 10,000 shapes."""
    n = 10_000
    tops = [f"s{i}" for i in range(n)]
    write(tmp_path / "slice.prototxt", 'name: "wide"\n' + data(2, n)
          + layer("slice", "Slice", ["data"], tops, "slice_param { axis: 1 }") + layer("cat", "Concat", tops, ["cat"])
          + layer("loss", "EuclideanLoss", ["cat", "data"], ["loss"]))
    write(tmp_path / "dummy.prototxt", 'name: "many"\n'
          + layer("data", "DummyData", tops=tops, body="dummy_data_param { shape { dim: 2 dim: 3 } }"))
    write(tmp_path / "fan.prototxt", 'name: "fan"\n' + data(2, 3)
          + "".join(layer(f"r{i}", "ReLU", ["data"], [f"r{i}"]) for i in range(n)))
    for name in ("slice", "dummy", "fan"):
        result = answered(run(f"{name}.prototxt", "--table", cwd=tmp_path))  # the table: one row per layer
        assert result.returncode == 0, result.stderr
        widest = max(map(len, result.stdout.splitlines()))
        assert widest < 1000, (name, widest)
    result = answered(run("fan.prototxt", "--format", "json", cwd=tmp_path))
    split = [x for x in json.loads(result.stdout)["nets"][0]["layers"] if x["name"] == "data_data_0_split"]
    assert len(split[0]["tops"]) == n  # Caffe's Split of the data top


@pytest.mark.parametrize("text", ["layer { " * 100_000 + "}" * 100_000, "{" * 10**6, "layer { " * 99 + "}" * 99,
                                  'net_param { layer { name: "a" ' * 30_000],
                         ids=["100000-layers-in-layers", "a-million-braces", "99-levels", "solver-net-params"])
def test_deep_nesting(tmp_path, text):
    write(tmp_path / "net.prototxt", text)
    refused(run("net.prototxt", cwd=tmp_path), "net.prototxt:1")


def test_deep_nesting_in_a_caffe_log(tmp_path):
    """A log whose printed net nests 100,000 deep."""
    with open(os.path.join(DATA, "logs", "cvgj_alexnet_test.log")) as f:
        text = f.read()
    at = text.index("layer {", text.index("Initializing net from parameters"))
    write(tmp_path / "caffe.log", text[:at] + "layer {\n" * 100_000 + text[at:])
    refused(run("caffe.log", cwd=tmp_path), "caffe.log:")


# --- huge files -------------------------------------------------------------------------------------------
HUNDRED_MB = 100 * 2**20


def test_a_100_mb_prototxt_is_refused_unread(tmp_path):
    with open(tmp_path / "net.prototxt", "w") as f:
        line = 'layer { name: "r" type: "ReLU" bottom: "data" top: "data" }\n'
        f.write(line * (HUNDRED_MB // len(line)))
    refused(run("net.prototxt", cwd=tmp_path), "net.prototxt: ", "over 16 MiB")


def caffe_log(name="cvgj_alexnet_test.log"):
    with open(os.path.join(DATA, "logs", name)) as f:
        return f.read()


def test_a_100_mb_caffe_log_is_read(tmp_path):
    """A long training run's log: the nets at its head, then 100 MB of iterations."""
    with open(tmp_path / "caffe.log", "w") as f:
        f.write(caffe_log())
        chunk = "".join(f"I0101 00:00:00.000000  1 solver.cpp:228] Iteration {k}, loss = 0.5\n" for k in range(10_000))
        while f.tell() < HUNDRED_MB:
            f.write(chunk)
    result = answered(run("caffe.log", cwd=tmp_path, timeout=300), seconds=120)
    assert result.returncode == 0, result.stderr


def test_a_caffe_log_with_a_100_mb_line(tmp_path):
    """A line glog could never write (it cuts messages at 30,000 bytes) is passed over whole: the
    lines after it keep their numbers (the data shape's line below is the unchanged log's, plus one)."""
    log = caffe_log()
    plain = answered(run(os.path.join(DATA, "logs", "cvgj_alexnet_test.log"), cwd=tmp_path))
    line = "I0101 00:00:00.000000  1 solver.cpp:228] " + "x" * HUNDRED_MB + "\n"
    write(tmp_path / "caffe.log", line + log)
    result = answered(run("caffe.log", cwd=tmp_path))
    assert result.returncode == 0, result.stderr
    shapes = [s for s in plain.stdout.splitlines() if s.startswith("Data shape:")]
    moved = [s for s in result.stdout.splitlines() if s.startswith("Data shape:")]
    numbers = [int(s.rsplit("line ", 1)[1]) for s in shapes]
    assert numbers and [int(s.rsplit("line ", 1)[1]) for s in moved] == [n + 1 for n in numbers]


# --- pipes and devices ------------------------------------------------------------------------------------
@contextlib.contextmanager
def endless_pipe(path, chunk):
    """A FIFO at `path` that a thread writes `chunk` into for as long as anyone reads it."""
    os.mkfifo(path)
    stop = threading.Event()

    def feed():
        try:
            with open(path, "wb") as f:  # waits for a reader
                while not stop.is_set():
                    f.write(chunk)
        except (BrokenPipeError, OSError):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        yield path
    finally:
        stop.set()
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # lets a writer still waiting for a reader go on
        time.sleep(0.1)
        os.close(fd)
        writer.join(10)


def test_devices_are_refused(tmp_path):
    for device in ("/dev/zero", "/dev/urandom"):
        refused(run(device, cwd=tmp_path), f"{device}: this is a device, not a file")
        refused(run(LENET, *LENET_INPUTS, "--log", device, cwd=tmp_path), f"{device}: this is a device")
        refused(run(LENET, *LENET_INPUTS, "--shapes", device, cwd=tmp_path), f"{device}: this is a device")


def test_an_endless_pipe_is_refused_unread(tmp_path):
    """A FIFO fed forever by a thread, as the net, as a Caffe log given to audit, and as the --log of
    a net; and a FIFO no one writes to, which opening would wait on forever."""
    with endless_pipe(str(tmp_path / "net.prototxt"), b'layer { name: "r" type: "ReLU" } ' * 1000):
        refused(run("net.prototxt", cwd=tmp_path), "net.prototxt: this is a pipe, not a file")
    with endless_pipe(str(tmp_path / "caffe.log"), caffe_log().encode()):
        refused(run("caffe.log", cwd=tmp_path), "caffe.log: this is a pipe")
        refused(run(LENET, *LENET_INPUTS, "--log", "caffe.log", cwd=tmp_path), "caffe.log: this is a pipe, not a "
                "Caffe log")
    os.mkfifo(tmp_path / "silent.prototxt")
    refused(run("silent.prototxt", cwd=tmp_path), "silent.prototxt: this is a pipe")


# --- files naming themselves ---------------------------------------------------------------------------------
def test_a_solver_naming_itself_as_its_net(tmp_path):
    write(tmp_path / "solver.prototxt", 'base_lr: 0.01\nnet: "solver.prototxt"\n')
    refused(run("solver.prototxt", cwd=tmp_path), "solver.prototxt:2: the net it names, 'solver.prototxt', is a "
            "solver")
    write(tmp_path / "both.prototxt", 'train_net: "both.prototxt"\ntest_net: "both.prototxt"\ntest_iter: 1\n'
          'test_interval: 1\n')
    refused(run("both.prototxt", cwd=tmp_path), "both.prototxt:1: ", "is a solver")


def test_two_solvers_naming_each_other(tmp_path):
    write(tmp_path / "a.prototxt", 'net: "b.prototxt"\n')
    write(tmp_path / "b.prototxt", 'net: "a.prototxt"\n')
    refused(run("a.prototxt", cwd=tmp_path), "a.prototxt:1: the net it names, 'b.prototxt', is a solver")


# --- shapes files ------------------------------------------------------------------------------------------
VOC = os.path.join(ROOT, "samples", "voc-fcn8s_train.prototxt")


@pytest.mark.parametrize("content, words", [
    ((b"# " + b"x" * 1000 + b"\n") * (HUNDRED_MB // 1000), ["over 1 MiB"]),
    (b"data = " + b"1x" * (50 * 2**20) + b"1\n", ["over 1 MiB"]),
    (os.urandom(HUNDRED_MB // 10), []),
    (b"data = 1x3x375x500\n" + bytes(range(256)) * 64, ["cannot read the shapes file"]),
    (b"data = " + b"1x" * 100 + b"1\n", [":1: ", "at most 32 axes"]),
], ids=["100-mb-of-comments", "a-50-mb-line", "10-mb-binary", "binary-after-a-line", "100-axes"])
def test_a_hostile_shapes_file(tmp_path, content, words):
    (tmp_path / "voc.prototxt.shapes").write_bytes(content)
    with open(VOC) as f:
        write(tmp_path / "voc.prototxt", f.read())
    refused(run("voc.prototxt", cwd=tmp_path), "voc.prototxt.shapes", *words)


# --- caffe.proto ---------------------------------------------------------------------------------------------
def bvlc_proto(imports=()):
    with open(os.path.join(ROOT, "proto", "caffe.proto")) as f:
        lines = f.read().split("\n")
    at = next(k for k, line in enumerate(lines) if line.startswith("syntax")) + 1
    return "\n".join(lines[:at] + [f'import "{name}";' for name in imports] + lines[at:])


def test_a_hostile_caffe_proto(tmp_path):
    (tmp_path / "huge.proto").write_text(bvlc_proto() + ("// " + "x" * 1000 + "\n") * (HUNDRED_MB // 1000))
    (tmp_path / "binary.proto").write_bytes(os.urandom(2**20))
    write(tmp_path / "self.proto", bvlc_proto(["self.proto"]))
    write(tmp_path / "a.proto", bvlc_proto(["b.proto"]))
    write(tmp_path / "b.proto", 'syntax = "proto2";\nimport "a.proto";\npackage caffe;\n')
    write(tmp_path / "zero.proto", bvlc_proto(["dev.proto"]))
    os.symlink("/dev/zero", tmp_path / "dev.proto")
    os.mkfifo(tmp_path / "pipe.proto")
    write(tmp_path / "imports_pipe.proto", bvlc_proto(["pipe.proto"]))
    write(tmp_path / "deep.proto", bvlc_proto() + "message D {" * 10_000 + "}" * 10_000 + "\n")
    for proto, words in [("huge.proto", ["over 2 MiB"]), ("binary.proto", ["binary"]),
                         ("self.proto", [":2: ", "recursively imports itself"]),
                         ("a.proto", ["recursively imports"]), ("zero.proto", [":2: it imports dev.proto, which is a device"]),
                         ("imports_pipe.proto", [":2: it imports pipe.proto, which is a pipe"]),
                         ("pipe.proto", ["this is a pipe"]), ("deep.proto", ["protoc could not compile it"])]:
        refused(run(LENET, *LENET_INPUTS, "--caffe-proto", proto, cwd=tmp_path), proto, *words)


# --- datasets --------------------------------------------------------------------------------------------------
def data_net(layer_text):
    return datasets.net(layer_text, tail='layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" '
                        'inner_product_param { num_output: 2 } }\nlayer { name: "loss" type: "SoftmaxWithLoss" '
                        'bottom: "ip" bottom: "label" top: "loss" }')


def lmdb_layer(source, backend="LMDB"):
    return (f'layer {{ name: "data" type: "Data" top: "data" top: "label" '
            f'data_param {{ source: "{source}" backend: {backend} batch_size: 4 }} }}')


def hdf5_layer(source):
    return (f'layer {{ name: "data" type: "HDF5Data" top: "data" top: "label" '
            f'hdf5_data_param {{ source: "{source}" batch_size: 4 }} }}')


def test_a_dataset_that_is_a_pipe(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "folder" / "data.mdb")
    write(tmp_path / "list.txt", "pipe\n")
    for name, layer_text, words in [
            ("lmdb", lmdb_layer("pipe"), ["source 'pipe' (LMDB)", "is a pipe"]),
            ("leveldb", lmdb_layer("pipe", "LEVELDB"), ["is a pipe"]),
            ("lmdb-file", lmdb_layer("folder"), ["no data.mdb"]),
            ("hdf5-list", hdf5_layer("pipe"), ["source 'pipe'", "is a pipe"]),
            ("hdf5-file", hdf5_layer("list.txt"), ["HDF5 file 'pipe'", "is a pipe"])]:
        write(tmp_path / f"{name}.prototxt", data_net(layer_text))
        refused(run(f"{name}.prototxt", cwd=tmp_path), f"{name}.prototxt:2: layer 'data': ", *words)


@pytest.fixture(scope="module")
def million():
    """A folder of a million entries (in memory, /dev/shm, where there is one: on disk they take
    minutes to make and remove), with an LMDB of three 1x28x28 records among them."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=base) as folder:
        crowded = os.path.join(folder, "crowded")
        os.mkdir(crowded)
        at = os.open(crowded, os.O_RDONLY)
        try:  # empty regular files, one system call each to make and (faster than rmtree's walk) to remove
            for i in range(1_000_000):
                os.mknod(f"entry{i}", 0o100644, dir_fd=at)
            datasets.write_lmdb(crowded, datasets.records(3, 1, 28, 28))
            yield crowded
            for i in range(1_000_000):
                os.unlink(f"entry{i}", dir_fd=at)
        finally:
            os.close(at)


@pytest.mark.slow
def test_a_dataset_folder_of_a_million_entries(tmp_path, million):
    write(tmp_path / "lmdb.prototxt", data_net(lmdb_layer(million)))
    result = answered(run("lmdb.prototxt", cwd=tmp_path))
    assert result.returncode == 0, result.stderr
    assert "top 'data' 4x1x28x28" in result.stdout  # the LMDB's first record, 1x28x28, at batch 4
    write(tmp_path / "leveldb.prototxt", data_net(lmdb_layer(million, "LEVELDB")))
    refused(run("leveldb.prototxt", cwd=tmp_path), "is not a LevelDB: an LMDB (it has data.mdb)")
    write(tmp_path / "hdf5.prototxt", data_net(hdf5_layer(million)))
    refused(run("hdf5.prototxt", cwd=tmp_path), "HDF5 file list", "Is a directory")
