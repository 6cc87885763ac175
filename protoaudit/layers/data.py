"""Data sources: Input, DummyData, MemoryData and the dataset readers (Data, ImageData, WindowData, HDF5Data).

A data top's shape comes, in this order, from (1) --input; (2) the dataset, when it is on disk, read
as Caffe reads it at setup (the first record, the first image of a list, the first HDF5 file)
and combined with the layer's parameters as Caffe combines them (crop wins over the stored size,
new_height/new_width resize first, force_color/force_gray set the channels of an encoded record);
(3) the parameters alone (crop_size, new_height/new_width, is_color, the channel count of
mean_value or of a readable mean file, which also gives the stored size), assuming 3 channels
(colour images) where only the channel count is unknown, which the report shows with the flag that
changes it; (4) else the user's --input, asked for with the dimensions that are known. Where each
shape came from is noted for the report. `--batch` replaces the batch size.

What a data layer holds, beyond its tops, is in `Prefetching.touches` and `HDF5Data.touches`.
"""
import shlex

from ..read.datasets import MissingLibrary, reader
from ..read.datasets.examples import example, hdf5_example, image_list_example
from . import touch
from .base import Layer, count, one_pixel, register
from .cxx import STRING, assigned
from .sources import Source, cached, legacy_chw

# Host memory of Caffe's data layers (BVLC 9b89154), measured byte for byte with a heap interposer
# against the same nets with Input layers (tests/data/data_layers/README.md gives the runs and the
# source lines behind each figure).
THREAD_BYTES = 1144  # the prefetch thread: boost's thread data 384, glibc's TLS vector 720, shared_ptr 40
THREAD_RNG_BYTES = 2704  # the thread's own Caffe object and RNG (internal_thread.cpp:48, common.cpp:15-19)
RNG_BYTES = 2608  # one Caffe::RNG (a boost::mt19937 of 2,504 bytes and its holders)
GLOG_THREAD_BYTES = 30457  # glog's message buffer, on the prefetch thread's first LOG(INFO)
LMDB_BYTES = 1070  # env 248, env_open 108, read txn 234, cursor 392, LMDBCursor 64, LMDB 24; + strdup(path)
LEVELDB_BYTES = 152912  # DB::Open read-write: log and MANIFEST writers (2 x 65,624), caches, info LOG...
LEVELDB_BYTES_PER_PATH_CHAR = 10  # the database's name, kept in its file names and handles
OPENCV_BYTES = 453134  # OpenCV's codec registry (with GDAL's drivers), on the first image decode
OPENCV_RESIZE_BYTES = 2280  # cv::resize's thread-local state, in the prefetch thread
HDF5_LIBRARY_BYTES = 298576  # the HDF5 library's state and free lists, on first use
HDF5_CONVERSION_BYTES = 1048600  # HDF5's 1 MiB type-conversion buffer, kept after reading non-float data
DATUM_BYTES = 72  # sizeof(caffe::Datum), protobuf 3.21 (BVLC's and PSPNet's; tests/data/host_objects/sizeof.tsv)
LIST_ENTRY_BYTES = {"ImageData": 40, "DenseImageData": 64}  # sizeof(pair<string, int>), (pair<string, string>)

# the readers, each result kept while its file is unchanged (the largest-batch search re-audits)
MEAN_SHAPE = cached("mean_file", "blob_shape")
FIRST_RECORD = {"LMDB": cached("lmdb_db", "first_record"), "LevelDB": cached("leveldb_db", "first_record")}
IMAGE_HEADER = cached("image_file", "header")
FIRST_LINE = cached("lists", "first_line_entry")
FIRST_TOKENS = cached("lists", "first_tokens")
LIST_ENTRIES = cached("lists", "entries")
WINDOW_ENTRY = cached("window_file", "first_entry")
HDF5_DATASETS = cached("hdf5_file", "datasets")


# The images assumed, in this order, for a data top whose dataset is not on this machine, where
# neither the layer's parameters nor a log or deploy net beside the net give its size: the first
# the net takes (a layer stops on the others). First the training crop of the ImageNet models most
# Caffe nets are built from (VGG, GoogLeNet, ResNet), in colour; then the other crops and images
# Caffe's nets are commonly built for. ASSUMED_CHANNELS is the channel count assumed alone.
ASSUMED_IMAGES = (
    ((3, 224, 224), "the ImageNet training crop most Caffe nets are built for, in colour"),
    ((3, 227, 227), "AlexNet's and CaffeNet's crop"),
    ((3, 299, 299), "Inception v3's crop"),
    ((1, 224, 224), "grey images, or the luminance a super-resolution net reads"),
    ((3, 32, 32), "CIFAR's images"),
    ((1, 28, 28), "MNIST's images"),
)
ASSUMED_CHANNELS = ASSUMED_IMAGES[0][0][0]
# Where every image above stops a layer (a decoder whose Upsample sizes are fixed, a U-Net whose
# crops need its tile), the first square colour image of these sides that the net takes, and
# SegNet's CamVid frame and FlyingThings3D's (the frames FlowNet 2.0's 768x384 crops are cut from):
# the size the net's own fixed sizes imply, searched for, never derived.
SEARCHED_SIDES = (256, 512, 128, 64, 96, 160, 192, 320, 384, 448, 572)
SEARCHED_IMAGES = tuple(((ASSUMED_CHANNELS, side, side), "a square image the net's fixed sizes take")
                        for side in SEARCHED_SIDES) + (((ASSUMED_CHANNELS, 360, 480), "SegNet's CamVid frames"),
                                                 ((ASSUMED_CHANNELS, 540, 960), "FlyingThings3D's frames"))


NOT_HERE = "its dataset not being on this machine"  # why a data top's shape is assumed, unless said otherwise


def assumed_image(known, image=ASSUMED_IMAGES[0], passed="", lacking=NOT_HERE):
    """(shape, why, where) of a data top from its known dimensions (batch, channels, [clip length,]
    height, width; None where unknown), the unknown ones `image`'s ((C, H, W), what it is), or None
    where another dimension is unknown or the known ones make it an image already assumed.
    `passed`: why the images before it were passed over; `lacking`: why the data gives no size."""
    (c, h, w), what = image
    if len(known) < 4 or known[0] is None or any(k is None for k in known[2:-2]):
        return None
    channels = c if known[1] is None else known[1]
    height, width = (a if k is None else k for k, a in zip(known[-2:], (h, w)))
    guessed = ([f"its height and width {h}x{w}"] if None in known[-2:] else []) + \
              ([f"{c} channel{'s' if c > 1 else ''}"] if known[1] is None else [])
    if None not in known[-2:]:  # only the channels were guessed
        what = "colour" if c == 3 else "grey"
    why = (f"protoaudit assumes {' and '.join(guessed)} ({what}){passed}: every figure that grows with the "
           "image is for that size")
    return (known[0], channels) + tuple(known[2:-2]) + (height, width), why, \
        f"assumed: an image size, {lacking}"


class DataSource(Layer):
    exact_bottoms = 0
    data_source = True
    label_origin = "the layer's batch size (a label per image)"  # where the other tops' shapes come from

    def batch_size(self):
        raise NotImplementedError

    def assume_known(self, source, what, tops):
        """Note that `source`, not on this machine, is taken for the known dataset `what` says,
        with the --input of each (top, shape) that gives the user's own size instead."""
        flags = " ".join(f"--input {top}={'x'.join(map(str, shape))}" for top, shape in tops)
        self.assume(f"source '{source}' is not on this machine; {what}", f"{flags} (your data's size)")

    def reshape(self, bottoms):
        batch = self.batch_size()
        tops = []
        for j, _ in enumerate(self.lp.top):
            if j == 0:
                image, origin = self.data_shape(batch)
                shape = self.override(0, (batch,) + tuple(image) if image else None, own_batch=batch)
                self.check_batch_axis(0, shape)
                batch = shape[0]
                self.note_origin(0, shape, origin)
            else:
                shape = self.override(j, self.label_shape(batch))
                self.note_origin(j, shape, self.label_origin)
            tops.append(shape)
        return tops

    def check_batch_axis(self, top_index, shape):
        """A shape from --input or a log must start with the batch, as this layer's tops do (a log
        line `Top shape: (1)` gives none)."""
        top = self.lp.top[top_index]
        self.check(len(shape) > 0, f"top '{top}' is given no axes ({self.ctx.input_sources.get(top, '--input')}), "
                   f"but a {self.lp.type} layer's top starts with its batch",
                   fix=f"give its shape with --input {top}=NxCxHxW")

    def data_shape(self, batch):
        """((C, H, W), where it came from) for the data top (None when --input declares it), or
        need_input for the data top alone: the label follows the data's batch."""
        raise NotImplementedError

    def label_shape(self, batch):
        return (batch,)

    def crop(self):
        return self.lp.transform_param.crop_size


class DatasetLayer(DataSource):
    """A layer that reads a dataset on disk: its Source, the mean file, the channel assumption."""

    def __init__(self, lp, ctx):
        super().__init__(lp, ctx)
        self.files = Source(self)
        self.mean_shape = None  # the mean file's (C, H, W) when it was read
        self.mean_axes = 4  # its Blob's axes (a BlobProto's num, channels, height, width, unless it gives a shape)
        self.stored = None  # (C, H, W) of the first stored record or image, when it was read
        self.decodes = False  # whether the layer decodes images (OpenCV)

    def declared(self):
        return self.lp.top[0] in self.ctx.inputs

    def mean_elements(self):
        """The mean blob's elements: the mean file's shape (read, or else the stored record's,
        which Caffe checks it equals), or 0 without a mean file."""
        if not self.lp.transform_param.mean_file:
            return 0
        shape = self.mean_shape or self.stored
        if shape is None:
            return 0
        return count(shape)

    def read_mean(self):
        """The mean file's (C, H, W) as DataTransformer loads it, or None (none named, or not found)."""
        tp = self.lp.transform_param
        self.check(not (tp.mean_file and len(tp.mean_value)),
                   "Cannot specify mean_file and mean_value at the same time")
        if not tp.mean_file:
            return None
        found = self.files.find(tp.mean_file)
        if found is None:
            return None
        shape = self.files.read(MEAN_SHAPE, found.path, what=f"mean_file '{tp.mean_file}'")
        self.check(len(shape) <= 4, f"mean_file '{tp.mean_file}' has {len(shape)} axes; Caffe reads it as "
                   "(num, channels, height, width)")
        self.mean_shape = legacy_chw(shape)
        self.mean_axes = len(shape)
        self.mean_found = self.files.shown(found, tp.mean_file)
        return self.mean_shape

    def check_transform(self, channels, height, width, what):
        """DataTransformer's CHECKs on an image of this size (data_transformer.cpp:56-69, 251-265)."""
        tp = self.lp.transform_param
        crop = tp.crop_size
        self.check(height >= crop and width >= crop,
                   f"crop_size {crop} is larger than {what} ({height}x{width})")
        if self.mean_shape is not None:
            self.check(self.mean_shape == (channels, height, width),
                       f"the mean file is {'x'.join(map(str, self.mean_shape))} but {what} is "
                       f"{channels}x{height}x{width} (Caffe checks they agree)",
                       fix="use the mean computed on this dataset")
        values = len(tp.mean_value)
        self.check(values in (0, 1, channels),
                   f"{values} mean_value entries for {channels} channels (Caffe: 'Specify either 1 mean_value "
                   "or as many as channels')")

    def channels_from_parameters(self):
        """(channels, why) the parameters imply, else (None, None): a mean file's channels, one
        mean_value per channel, force_color/force_gray."""
        tp = self.lp.transform_param
        if self.mean_shape is not None:
            return self.mean_shape[0], f"the mean file {self.mean_found}"
        if len(tp.mean_value) > 1:
            return len(tp.mean_value), f"{len(tp.mean_value)} mean_value entries"
        if tp.force_color or tp.force_gray:
            return (3, "force_color") if tp.force_color else (1, "force_gray")
        return None, None

    def assume_colour(self, batch, height, width, why):
        """Only the channel count is unknown: 3 (colour images), shown with the flag that changes it."""
        top = self.lp.top[0]
        self.assume(f"top '{top}' has 3 channels (colour images): {why}, and nothing in the layer says",
                    f"--input {top}={batch}xCx{height}x{width}")
        return 3

    def missing(self, batch, known, reason, absent=False):
        """need_input for the data top, with the dimensions that are known; `absent`: the dataset is
        not on this machine (not merely unread), so the audit may assume its size (assumed_image)."""
        self.need_input(reason, self.lp.top[:1], known={self.lp.top[0]: (batch,) + tuple(known)}, absent=absent)

    def first_image(self, source, first_names, batch, channels, fixed):
        """The first image a list names, as Caffe reads it at setup: (image size (H, W), where it
        came from, the names `first_names(list path)` gave) -- or None when the list or the image is
        not on disk (or its reader is not installed) and `fixed` says the parameters fix the size;
        else need_input, with the dimensions that are known."""
        found = self.files.find(source)
        self.list_path = found.path if found else None
        if found is None:
            if fixed:
                return None
            self.missing(batch, (channels, None, None), self.files.not_found("source", source), absent=True)
        names = self.files.read(first_names, found.path, what=f"source '{source}'")
        image = self.files.find(names[0])
        if image is None:
            if fixed:
                return None
            self.missing(batch, (channels, None, None),
                         self.files.not_found(f"the first image that '{source}' names,", names[0]), absent=True)
        try:
            h, w, _, kind = self.files.read(IMAGE_HEADER, image.path, names[0],
                                            what=f"image '{names[0]}' (first in '{source}')")
        except MissingLibrary as e:
            if fixed:
                self.unread(e, f"image '{names[0]}'")
                return None
            self.missing(batch, (channels, None, None), f"{e.message} ({e.fix})")
        return (h, w), f"image {self.files.shown(image, names[0])} ({w}x{h} {kind}, first in {source})", names

    def list_touch(self, kind, names_of=None, values=0, what=""):
        """The list Caffe keeps (lines_: one pair per entry, names over 15 characters on the heap,
        in a vector grown by doubling), when the list was found; `names_of(line)` gives the names an
        entry keeps (default: ImageData's "path label" line, DenseImageData's two names). A fork's
        entry may also keep a vector of `values` 4-byte labels (`what`: floats, ints)."""
        lists = reader("lists")
        example = getattr(self, "example", None)  # a list of an example, known though not on disk
        if example is not None:
            e = lists.Entries(example.pairs, example.name_bytes, True)
        elif not getattr(self, "list_path", None):
            return []
        else:
            names_of = names_of or (lists.image_line_names if kind == "ImageData" else lists.pair_names)
            e = LIST_ENTRIES(self.list_path, names_of)
        capacity = 1 << max(0, e.count - 1).bit_length() if e.count else 0
        return [touch.host("lines_", capacity * LIST_ENTRY_BYTES[kind] + e.name_bytes + e.count * 4 * values,
                           f"{e.count:,} entries" + ("" if e.exact else " (estimated from the list's size)")
                           + (f", {values} {what} each" if values else ""))]

    def unread(self, e, what):
        """The dataset is there but its reader's library is not installed: the parameters' shape is
        used, and the report says the dataset was not read and how to read it."""
        self.assume(f"{what} was not read ({e.message}): the shape is the layer's parameters'", e.fix)


class Prefetching(DatasetLayer):
    """BasePrefetchingDataLayer (base_data_layer.cpp/.cu): a thread fills `data_param.prefetch` batches
    (default 4, also for ImageData and WindowData) of every top.

    What it holds (BVLC 9b89154; measured, tests/data/data_layers/README.md):
    - The P batches (D + L bytes each: the data top's and the label's), allocated at setup before the
      thread starts (base_data_layer.cpp:56-61). In GPU mode each also gets its device copy there
      (:63-70), which the thread fills by async_gpu_push; the host copies are pinned host memory.
    - The tops own no buffer: Forward points them at the current batch, `set_cpu_data` on the CPU
      (:118-125), `set_gpu_data` on the device (base_data_layer.cu:13-18). So after the first forward
      Caffe holds P batches, not P + 1 (an Input top owns its D + L instead). The data top's diff is
      the consumer's, as for any top.
    - `transformed_data_` only ever points into the batch being filled (data_layer.cpp:116): no buffer.
    - The transformer's mean blob, the mean file's size (the stored record's, not the crop's),
      host memory for the layer's life (data_transformer.cpp:27-29); mean_value is a few bytes.
    - Host state: the thread and its RNG, the transformer's RNG (mirror, or TRAIN with a crop:
      data_transformer.cpp:523-531). The batches' C++ objects, the queues, the transformer and
      the layer itself are Caffe's objects, derived with the others' (protoaudit.memory.host).
    Device memory in GPU mode is therefore the P batches' device copies and nothing else.
    """

    batches_in_array = False  # BVLC 9b89154 news each Batch into a shared_ptr (protoaudit.memory.host)

    def prefetch(self):
        return self.lp.data_param.prefetch

    def touches(self, run):
        P = self.prefetch()
        gpu = run.mode == "gpu"
        t = [touch.top(j, "data", "setup", owns=False) for j in range(len(run.tops))]
        for j, shape in enumerate(run.tops):
            name = f"prefetch[{P}].{self.lp.top[j]}"
            note = f"{P} x {'x'.join(map(str, shape))}"
            t.append(touch.buffer(name, P * count(shape), "setup", per_sample=True, kind="prefetch", note=note))
            if gpu:
                t.append(touch.buffer(name + " (host)", P * count(shape), "setup", per_sample=True,
                                      kind="prefetch", note=note + ", pinned host copies", device="host"))
        t.append(touch.host("prefetch thread", THREAD_BYTES, "boost::thread data, glibc's TLS vector"))
        rngs = self.rngs(run)
        t.append(touch.host("RNGs", THREAD_RNG_BYTES + rngs * RNG_BYTES,
                            f"the thread's and {rngs} more" if rngs else "the thread's"))
        mean = self.mean_elements()
        if mean:
            t.append(touch.buffer("data_mean_", mean, "setup", per_sample=False, note="the mean file's blob",
                                  device="host"))
        if self.decodes:
            t.append(touch.process("OpenCV codec registry", OPENCV_BYTES, "initialised by the first image decode"))
        return t + self.reader_touches(run)

    def rngs(self, run):
        """The RNGs the layer keeps besides its thread's: the transformer's (data_transformer.cpp:523-531)."""
        return int(self.transformer_draws())

    def transformer_draws(self):
        """Whether DataTransformer::InitRand makes an RNG: to mirror, or to crop in training."""
        tp = self.lp.transform_param
        return tp.mirror or (self.ctx.phase == "TRAIN" and tp.crop_size > 0)

    def reader_touches(self, run):
        return []



class CopyingPrefetching:
    """The BasePrefetchingDataLayer of forks built on 2015-16 BVLC Caffe (SSD, DeepLab v2 and
    PSPNet's Caffe), mixed in before a BVLC data-layer class: PREFETCH_COUNT batches whatever
    data_param.prefetch says (which sizes only their DataLayer's DataReader queue), held in an
    array inside the layer object (`batches_in_array`), and a forward that COPIES the current batch
    into the tops (caffe_copy into top->mutable_cpu_data(), or mutable_gpu_data() in
    base_data_layer.cu), which own their buffers, where BVLC 9b89154 points the tops at the batch.
    A subclass gives its fork's PREFETCH_COUNT and the Blobs of its Batch class, and the lines
    that say so."""

    PREFETCH_COUNT = None
    BATCH_BLOBS = None
    batches_in_array = True

    def prefetch(self):
        return self.PREFETCH_COUNT

    def touches(self, run):
        t = [x for x in super().touches(run) if not (x.what == "top" and x.stage == "setup" and not x.owns)]
        return t + [touch.top(j, "data", "forward") for j in range(len(run.tops))]


class ThroughDataReader:
    """The DataLayer of forks built on 2016 BVLC Caffe (deeplab-public-ver2 and PSPNet's Caffe,
    data_layer.hpp:33; SSD's DataReader<Datum>), mixed in before Data: it reads through a DataReader
    (data_reader.cpp, as in deeplab-public-ver2) rather than a cursor of its own. The reader makes
    data_param.prefetch x batch_size Datums at construction (:19-20, :44-49) and its own thread
    (:63-67) parses a record into each (:105-109), so once the prefetch thread has drawn more than
    that many, every Datum holds a record: its object, and its `data` string of the record's bytes
    (the first record's: raw pixels, or an encoded image, which varies from record to record).
    The reader's thread seeds its own RNG as the prefetch thread does (internal_thread.cpp). Its
    objects (queues, Body, the map of readers) are Caffe's objects (protoaudit.memory.host)."""

    def reader_touches(self, run):
        datums = self.lp.data_param.prefetch * run.tops[0][0]
        size = self.datum_bytes(run)
        t = super().reader_touches(run)
        t.append(touch.buffer("DataReader datums", datums, "setup", per_sample=True, itemsize=size, kind="prefetch",
                              device="host", note=f"{datums} Datums of {size:,} bytes (prefetch x batch_size)"))
        t.append(touch.host("DataReader thread", THREAD_BYTES + THREAD_RNG_BYTES, "its boost::thread and RNG"))
        return t

    def datum_bytes(self, run):
        """A Datum holding one record: the object, its data string (std::string assigned the
        record's bytes: the heap holds them and a terminator when they do not fit inline; without
        the dataset, a raw record of the stored shape, or of the top's image), its float_data
        array (8 bytes of header and the values)."""
        record = self.record
        if record is not None:
            data, floats = record.data_bytes, record.float_values
        else:
            data, floats = count(self.stored or run.tops[0][1:]), 0
        return DATUM_BYTES + STRING + assigned(data) + (8 + 4 * floats if floats else 0)


@register("Data")
class Data(Prefetching):
    """DataLayer (data_layer.cpp): the first record of an LMDB or LevelDB (Caffe's default backend),
    raw or encoded, shaped by DataTransformer::InferBlobShape: crop_size x crop_size, else the
    record's height x width; the record's channels, or for an encoded image 3 under force_color and 1
    under force_gray. The label top is (batch,)."""

    min_tops = 1
    max_tops = 2
    record = None  # the first record (read.datasets.datum.Record), when the dataset was read

    def batch_size(self):
        return self.lp.data_param.batch_size

    def backend(self):
        return "LMDB" if self.lp.data_param.backend == 1 else "LevelDB"

    def data_shape(self, batch):
        tp, source = self.lp.transform_param, self.lp.data_param.source
        self.check(not (tp.force_color and tp.force_gray), "cannot set both force_color and force_gray")
        self.read_mean()
        crop = tp.crop_size
        channels, why = self.channels_from_parameters()
        height = width = crop or None
        if not crop and self.mean_shape is not None:
            height, width = self.mean_shape[1:]
        origin = "the layer's parameters" + (f" ({why})" if why else "")
        if self.declared():
            return None, "--input"
        found = self.files.find(source)
        self.decodes = bool(tp.force_color or tp.force_gray)  # flags that only an encoded dataset reads
        if found is not None:
            what = f"source '{source}' ({self.backend()})"
            try:
                value = self.files.read(FIRST_RECORD[self.backend()], found.path, what=what)[1]
                record = self.files.read(reader("datum").parse, value, what, tp.force_color, tp.force_gray, what=what)
            except MissingLibrary as e:
                if height is None:
                    self.missing(batch, (channels, None, None), f"{what}: {e.message} ({e.fix})")
                self.unread(e, what)
                record = None
            if record is not None:
                self.stored = record.shape
                self.record = record
                self.decodes = record.encoding != "raw"
                self.check_transform(*record.shape, f"the first record ({record.describe()})")
                shape = (record.channels, crop or record.height, crop or record.width)
                return shape, f"dataset {self.files.shown(found, source)} (first record: {record.describe()})"
        elif (shape := self.of_example(source, batch, channels)) is not None:
            return shape
        elif height is None:
            self.missing(batch, (channels, None, None), self.files.not_found("source", source), absent=True)
        if channels is None:
            channels = self.assume_colour(batch, height, width, f"source '{source}' is not on disk")
            origin += "; 3 channels assumed"
        return (channels, height, width), origin

    def of_example(self, source, batch, channels):
        """(shape, origin) of a database of Caffe's examples that is not on disk (read.datasets.examples):
        its records' shape, cropped as the layer says, said as an assumption; None where the source
        names none, or where the layer's parameters do not fit that shape (a database of the same
        name made otherwise: a crop larger than its records, other channels, another mean's shape)."""
        known = example(source)
        shape = None if known is None else self.fitted(known.shape, channels)
        if shape is None:
            return None
        self.assume_known(source, f"by its name it is the database {known.made_by} makes, whose records are "
                                  f"{'x'.join(map(str, known.shape))}", [(self.lp.top[0], (batch, *shape))])
        return shape, f"assumed: Caffe's example database ({known.made_by})"

    def fitted(self, record, channels):
        """The data top's (C, H, W) from records of shape `record`, cropped as the layer says, taken
        as the records stored (self.stored); None where the layer's parameters do not fit them: other
        channels, a crop larger than the records, a mean of another shape or mean values for another
        channel count."""
        tp = self.lp.transform_param
        c, h, w = record
        if (channels not in (None, c) or tp.crop_size > min(h, w) or self.mean_shape not in (None, tuple(record))
                or len(tp.mean_value) not in (0, 1, c)):
            return None
        self.stored = tuple(record)
        return c, tp.crop_size or h, tp.crop_size or w

    def mean_elements(self):
        if self.lp.transform_param.mean_file and self.mean_shape is None and self.stored is None:
            return 0  # neither the mean file nor the dataset was read: its size is unknown
        return super().mean_elements()

    def reader_touches(self, run):
        """The database handle (db_lmdb.cpp, db_leveldb.cpp), and glog's buffer in the thread, whose
        only message is the wrap-around at the end of each pass over the dataset (data_layer.cpp:73-74):
        counted always, as training passes over its dataset more than once. LevelDB maps its table
        files, so records cost no heap; a LevelDB whose blocks are snappy-compressed also fills its
        8 MiB block cache as the thread reads, which is not counted (the measured datasets' blocks
        were stored raw)."""
        source = self.lp.data_param.source
        if self.backend() == "LMDB":
            db = touch.host("LMDB handle", LMDB_BYTES + len(source.encode()) + 1, "environment, read txn, cursor")
        else:
            db = touch.host("LevelDB handle", LEVELDB_BYTES + LEVELDB_BYTES_PER_PATH_CHAR * len(source.encode()),
                            "opened read-write: log and MANIFEST writers, caches")
        return [db, touch.host("glog thread buffer", GLOG_THREAD_BYTES, "'Restarting data prefetching from start.'")]


@register("ImageData")
class ImageData(Prefetching):
    """ImageDataLayer (image_data_layer.cpp): images named by a "path label" list, relative to
    root_folder, decoded in colour (3 channels) or grey (1, is_color: false), resized to
    new_height x new_width when given, then cropped to crop_size; the label top is always there.

    Caffe reads the image the list's first line names (after `shuffle` shuffles the list, or
    `rand_skip` skips a random number of lines) and every batch is reshaped to its own first image,
    so a list of images of several sizes works only at batch 1 or with new_height/new_width. At a
    larger batch every image has the size of the first (Transform checks it), so the list's first
    line is as good as Caffe's random one; protoaudit reads that one.
    """

    exact_tops = 2

    def batch_size(self):
        batch = self.param().batch_size
        self.check(batch > 0, f"{self.lp.type} needs a positive batch_size")
        return batch

    def param(self):
        return self.lp.image_data_param

    def fixed_size(self):
        """(H, W) before the crop that the parameters fix: new_height x new_width, else None."""
        p = self.param()
        self.check((p.new_height == 0) == (p.new_width == 0), "new_height and new_width must be set together")
        return (p.new_height, p.new_width) if p.new_height else None

    def first_names(self, list_path):
        """The image the list's first line names, under root_folder (a list of one name)."""
        return [self.param().root_folder + FIRST_LINE(list_path, "image list")]

    def data_shape(self, batch):
        p = self.param()
        channels = 3 if p.is_color else 1
        self.read_mean()
        self.decodes = True
        if self.declared():
            self.fixed_size()
            return None, "--input"
        crop = self.crop()
        fixed = self.fixed_size()
        mean_size = self.mean_shape[1:] if self.mean_shape is not None else None
        known = image_list_example(p.source) if self.files.find(p.source) is None else None
        if known is not None and known.channels == channels and not (fixed or mean_size):
            self.stored = (channels,) + known.size
            self.check_transform(channels, *known.size, "the image")
            h, w = known.size
            shape = (channels, crop or h, crop or w)
            self.assume_known(p.source, f"by its name it is the list of {known.made_by}, {w}x{h} colour images (the "
                                        "list's own entries are not counted)", [(self.lp.top[0], (batch, *shape))])
            return shape, f"assumed: {known.made_by}, {w}x{h}"
        read = self.first_image(self.param().source, self.first_names, batch, channels, crop or fixed or mean_size)
        if read is not None:
            (h, w), origin, _ = read
            stored = fixed or (h, w)
            self.stored = (channels,) + tuple(stored)
            if fixed:
                origin += f", resized to {fixed[1]}x{fixed[0]}"
            self.check_transform(channels, *stored, "the image" + (" after new_height/new_width" if fixed else ""))
            return (channels, crop or stored[0], crop or stored[1]), origin
        stored = fixed or (self.mean_shape[1:] if self.mean_shape is not None else None)
        if stored is not None:
            self.stored = (channels,) + tuple(stored)
            self.check_transform(channels, *stored, "the image" + (" after new_height/new_width" if fixed else ""))
        origin = "the layer's parameters (is_color" + (", new_height/new_width" if fixed else "") + \
                 (", crop_size" if crop else "") + (", the mean file" if stored and not fixed else "") + ")"
        return (channels, crop or stored[0], crop or stored[1]), origin

    def rngs(self, run):
        """The transformer's RNG, and the shuffle's prefetch_rng_ (image_data_layer.cpp:54)."""
        return super().rngs(run) + int(self.param().shuffle)

    def reader_touches(self, run):
        """The list Caffe keeps (lines_), and cv::resize's state in the thread."""
        t = self.list_touch("ImageData")
        if self.fixed_size():
            t.append(touch.host("cv::resize thread state", OPENCV_RESIZE_BYTES))
        return t

    def float_list_touches(self, kind, floats, names_of, what="floats"):
        """reader_touches of a fork's ImageData whose list keeps, per entry, its name and a vector of
        `floats` 4-byte labels (a multi-label line): lines_ grows by 4 x floats bytes an entry."""
        t = self.list_touch(kind, names_of, floats, what)
        if self.fixed_size():
            t.append(touch.host("cv::resize thread state", OPENCV_RESIZE_BYTES))
        return t


@register("WindowData")
class WindowData(Prefetching):
    """WindowDataLayer (window_data_layer.cpp): windows warped to transform_param's crop_size, with the
    channel count the window file gives (its entries all say the same; images are always decoded in
    colour, so a working file says 3). Without the window file, 3 channels are assumed. The window
    lists it reads whole at setup (7 floats a window, and the image list) are host memory that is
    not counted: no run of this layer was measured."""

    exact_tops = 2

    def batch_size(self):
        return self.lp.window_data_param.batch_size

    def data_shape(self, batch):
        crop = self.crop()
        self.check(crop > 0, "WindowData needs transform_param { crop_size } (the window size)")
        self.read_mean()
        self.decodes = True
        if self.declared():
            return None, "--input"
        source = self.lp.window_data_param.source
        found = self.files.find(source)
        if found is not None:
            _, channels, _, _ = self.files.read(WINDOW_ENTRY, found.path,
                                                what=f"source '{source}'")
            self.check(channels > 0, f"the window file '{source}' gives {channels} channels")
            return (channels, crop, crop), f"window file {self.files.shown(found, source)} ({channels} channels) " \
                                           "and crop_size"
        channels, why = self.channels_from_parameters()
        if channels is None:
            channels = self.assume_colour(batch, crop, crop, f"the window file '{source}' is not on disk")
            return (channels, crop, crop), "crop_size; 3 channels assumed"
        return (channels, crop, crop), f"the layer's parameters (crop_size, {why})"

    def rngs(self, run):
        """The transformer's RNG and the layer's own prefetch_rng_ (mirror or crop_size, always set)."""
        return super().rngs(run) + 1

    def mean_elements(self):
        """The mean is loaded twice: by the transformer and by the layer (window_data_layer.cpp:206-214)."""
        return 2 * count(self.mean_shape) if self.mean_shape is not None else 0


@register("HDF5Data")
class HDF5Data(DataSource):
    """HDF5DataLayer (hdf5_data_layer.cpp): `source` lists .h5 files; each top is the dataset of the
    same name in the first one (batch_size rows of it). No transform, no thread: the tops own their
    memory, filled by copying rows (hdf5_data_layer.cpp:163-178)."""

    min_tops = 1

    def __init__(self, lp, ctx):
        super().__init__(lp, ctx)
        self.files = Source(self)
        self.sets = None  # hdf5_file.Dataset per top, when the first file was read
        self.file_count = None

    def batch_size(self):
        return self.lp.hdf5_data_param.batch_size

    def reshape(self, bottoms):
        self.check(not self.lp.HasField("transform_param"), "HDF5Data does not transform data",
                   fix="remove transform_param")
        return self.dataset_tops()

    def row_dims(self):
        """A row's dimensions the parameters give, None where unknown, for the --input asked for."""
        return (None, None, None)

    def row_shape(self, shape):
        """A top's row (its shape after the batch) from its dataset's `shape` in the first file."""
        return tuple(shape[1:])

    def held_elements(self):
        """The floats hdf_blobs_ holds: the first file's datasets."""
        return sum(count(d.shape) for d in self.sets)

    def dataset_tops(self):
        """Each top: batch_size rows of its dataset in the first listed file, or --input."""
        batch = self.batch_size()
        tops = list(self.lp.top)
        declared = all(t in self.ctx.inputs for t in tops)
        known = {t: (batch if self.ctx.batch is None else self.ctx.batch,) + self.row_dims() for t in tops}
        try:
            self.sets, origin = self.read_first_file()
        except MissingLibrary as e:
            if not declared:
                self.need_input(f"HDF5Data: {e.message} ({e.fix})", known=known)
            self.sets, origin = None, None
        if self.sets is None and not declared:
            self.need_input(origin, known=known, absent=True)
        shapes = []
        for j, top in enumerate(tops):
            own = (batch,) + self.row_shape(self.sets[j].shape) if self.sets else None
            shape = self.override(j, own, own_batch=batch)
            if shape is None:
                self.need_input(origin, known=known)
            self.note_origin(j, shape, origin if own else "--input")
            shapes.append(shape)
        return shapes

    def read_first_file(self):
        """(Datasets of the first listed file, origin) or (None, why not)."""
        source = self.lp.hdf5_data_param.source
        found = self.files.find(source)
        if found is None:
            return self.of_example(source) or (None, "HDF5Data: " + self.files.not_found("source", source))
        first = self.files.read(FIRST_TOKENS, found.path, 1, "HDF5 file list", what=f"source '{source}'")[0]
        self.file_count = LIST_ENTRIES(found.path, reader("lists").token_names)
        h5 = self.files.find(first)
        if h5 is None:
            return None, "HDF5Data: " + self.files.not_found(f"the first file that '{source}' lists,", first)
        sets = self.files.read(HDF5_DATASETS, h5.path, tuple(self.lp.top), what=f"HDF5 file '{first}'")
        described = ", ".join(f"{d.name} {'x'.join(map(str, d.shape))} {d.dtype}" for d in sets)
        return sets, f"HDF5 file {self.files.shown(h5, first)} (first in {source}: {described})"

    def of_example(self, source):
        """(Datasets, origin) of an HDF5 list of Caffe's examples that is not on disk
        (read.datasets.examples), said as an assumption; None where the source names none or the
        layer's tops are not its datasets."""
        from ..read.datasets.hdf5_file import Dataset

        known = hdf5_example(source)
        if known is None or not set(self.lp.top) <= {name for name, _, _ in known.datasets}:
            return None
        by_name = {name: (rows, dtype) for name, rows, dtype in known.datasets}
        sets = [Dataset(top, (known.rows,) + by_name[top][0], by_name[top][1], by_name[top][1] == "float32")
                for top in self.lp.top]
        self.file_count = reader("lists").Entries(known.listed, 0, False)
        described = ", ".join(f"{d.name} {'x'.join(map(str, d.shape))} {d.dtype}" for d in sets)
        self.assume_known(source, f"by its name it is the list {known.made_by} writes: {described}, naming its file "
                                  f"{('once', 'twice')[known.listed - 1]} (the file names' own bytes, which depend on "
                                  "where Caffe's root is, are not counted)",
                          [(d.name, (self.batch_size(), *d.shape[1:])) for d in sets])
        return sets, f"assumed: Caffe's example HDF5 list ({known.made_by})"

    def touches(self, run):
        """Beyond its tops (which it owns, as an Input layer does): hdf_blobs_, the whole current
        file's datasets as floats (util/hdf5.cpp:92-93), with its row permutation; the HDF5
        library's own state; and HDF5's type-conversion buffer when a dataset is not stored as
        float. Caffe keeps the current file only: a later, larger file in the list replaces it."""
        t = super().touches(run)
        t.append(touch.process("HDF5 library", HDF5_LIBRARY_BYTES, "initialised on first use"))
        if self.sets:
            rows = self.sets[0].shape[0]
            t.append(touch.buffer("hdf_blobs_", self.held_elements(), "setup", per_sample=False,
                                  note=f"the first file: {rows:,} rows", device="host"))
            files = self.file_count or reader("lists").Entries(1, 0, True)
            capacity = 1 << max(0, files.count - 1).bit_length()
            t.append(touch.host("file list and permutations",
                                capacity * STRING + files.name_bytes + 4 * rows + 4 * files.count,
                                "hdf_filenames_, data_permutation_, file_permutation_"))
            if not all(d.native_float for d in self.sets):
                t.append(touch.process("HDF5 conversion buffer", HDF5_CONVERSION_BYTES,
                                       "kept after reading non-float data as float"))
        return t


@register("MemoryData")
class MemoryData(DataSource):
    exact_tops = 2

    def reshape(self, bottoms):
        p = self.lp.memory_data_param
        self.check(p.batch_size * p.channels * p.height * p.width > 0,
                   "batch_size, channels, height and width must be specified and positive in memory_data_param")
        data = self.override(0, (p.batch_size, p.channels, p.height, p.width))
        self.check_batch_axis(0, data)
        label = self.override(1, (data[0],))
        self.note_origin(0, data, "the layer's parameters")
        self.note_origin(1, label, "the layer's batch size (a label per image)")
        return [data, label]


def once_or_per_top(layer, values, what):
    """Caffe's rule for shape lists: one entry for every top, or one per top; the entry for each top."""
    tops = len(layer.lp.top)
    layer.check(len(values) in (1, tops), f"give {what} once, or once per top ({tops}); it is given "
                f"{len(values)} times")
    return [values[0] if len(values) == 1 else values[j] for j in range(tops)]


@register("Input")
class Input(DataSource):
    """Shapes from input_param (once, or once per top); with none, the user's --input."""

    min_tops = 1

    def reshape(self, bottoms):
        shapes = self.lp.input_param.shape
        if not shapes:
            tops = [self.override(j, None) for j in range(len(self.lp.top))]
            if None in tops:
                self.need_input("Input layer without input_param { shape }")
            for j, shape in enumerate(tops):
                self.note_origin(j, shape, "--input")
            return tops
        tops = [self.override(j, tuple(s.dim)) for j, s in enumerate(once_or_per_top(self, shapes, "shape"))]
        for j, (top, shape) in enumerate(zip(self.lp.top, tops)):
            self.note_origin(j, shape, "the layer's input_param" + one_pixel(top, shape))
        return tops

    def touches(self, run):
        """Input's forward does nothing: its tops are allocated when a consumer first reads them."""
        return []


@register("DummyData")
class DummyData(DataSource):
    """Shapes from `shape` (once, or once per top), or from the legacy num/channels/height/width
    lists (each once, or once per top), which make 4-axis tops."""

    min_tops = 1

    def reshape(self, bottoms):
        p = self.lp.dummy_data_param
        fillers = len(p.data_filler)
        self.check(fillers in (0, 1, len(self.lp.top)),
                   f"give 0, 1 or one data_filler per top ({len(self.lp.top)}); {fillers} are given")
        legacy = [list(p.num), list(p.channels), list(p.height), list(p.width)]
        if any(legacy):
            self.check(not p.shape, "dummy_data_param gives both shape and the legacy num/channels/height/width")
            columns = [once_or_per_top(self, values, name)
                       for values, name in zip(legacy, ("num", "channels", "height", "width"))]
            shapes = list(zip(*columns))
        else:
            shapes = [tuple(s.dim) for s in once_or_per_top(self, p.shape, "shape")]
        tops = [self.override(j, shape) for j, shape in enumerate(shapes)]
        for j, shape in enumerate(tops):
            self.note_origin(j, shape, "the layer's dummy_data_param")
        return tops

    def touches(self, run):
        """LayerSetUp runs one forward that fills only the tops with a constant filler (the
        default); the others are first filled by the first forward."""
        fillers = self.lp.dummy_data_param.data_filler
        constant = [(fillers[0] if len(fillers) == 1 else fillers[j]).type == "constant" if fillers else True
                    for j in range(len(run.tops))]
        return [touch.top(j, "data", "setup" if constant[j] else "forward") for j in range(len(run.tops))]


class Declared(Layer):
    """A layer whose top shapes protoaudit cannot compute: the user declares every top with --input.
    Its tops and their diffs are counted; whatever its own code allocates is a gap, reported."""

    gap = "its own buffers (protoaudit cannot see into it)"

    def reshape(self, bottoms):
        missing = [t for t in self.lp.top if t not in self.ctx.inputs]
        if missing:
            self.need_input(self.why(self.lp), missing)
        return [self.override(j, None) for j in range(len(self.lp.top))]

    @classmethod
    def why(cls, lp):
        """Why the user must declare the layer's tops."""
        return f"unknown layer type '{lp.type}'"

    @classmethod
    def asks(cls, lp):
        """Whether the user must declare this layer's tops (else it knows their shapes)."""
        return True


def named_like_a_loss(type_name):
    """Whether a layer type of no known rule is named like a loss (`...Loss`, `...LossWithTV`): Caffe's
    forks name their LossLayer subclasses so, and such a layer at the net's end is taken as one (Unread)."""
    return "loss" in type_name.lower()


class Unread(Declared):
    """A layer of a type protoaudit has no rule for whose tops no layer of the net reads: a custom loss
    or metric at the net's end. Nothing else depends on their shapes, so the rest of the net is
    audited: a type named like a loss (`...Loss`) is taken as Caffe's LossLayer (a scalar top 0 of loss
    weight 1 by default, so the layers below it run backward), any other top is counted empty. What
    its code allocates is a gap, reported; the net driver says the rest as an assumption."""

    gap = "its own buffers (protoaudit has no rule for its type)"

    @property
    def loss_by_default(self):
        return named_like_a_loss(self.lp.type)

    def reshape(self, bottoms):
        shapes = [(0,)] * len(self.lp.top)
        if self.loss_by_default:
            shapes[0] = ()
        return [self.override(j, shape) for j, shape in enumerate(shapes)]


# the fields of a layer's *_param that only a layer with weights has
WEIGHT_FIELDS = ("num_output", "weight_filler", "bias_filler", "filler")


class Logged(Declared):
    """A layer of a type protoaudit has no rule for, in a net Caffe's log records: Caffe printed its
    top shapes (and loss weights), so they are the log's, and the net is audited around it. Its
    tops and their diffs are counted as any layer's; its parameter blobs and what its code
    allocates are unknown, counted as none, and said so."""

    gap = "its parameters and internal buffers (protoaudit has no rule for its type)"

    @property
    def logged(self):
        return self.ctx.logged_layers[self.lp.name]

    @classmethod
    def asks(cls, lp):
        return False

    def reshape(self, bottoms):
        tops = [self.override(j, shape) for j, shape in enumerate(self.logged.shapes)]
        moved = tops != [tuple(shape) for shape in self.logged.shapes]
        batch = f" (--batch {self.ctx.batch} taken as their first axis, as an --input shape's)" if moved else ""
        weights = self.weights_said()
        self.assume(f"type {self.lp.type}, no rule in protoaudit: its top shapes are Caffe's own, from the log "
                    f"(line {self.logged.line}){batch}; its parameters and internal buffers are not counted"
                    + (f"; it has {weights}: its weights are not counted" if weights else ""),
                    "declare its tops as for any layer of a type protoaudit does not know: "
                    + " ".join("--input " + shlex.quote(f"{top}={'x'.join(map(str, shape)) or 1}")
                               for top, shape in zip(self.lp.top, tops)))
        return tops

    def loss_weights(self):
        """The loss weights Caffe printed for its tops (a loss layer's default among them), or ()
        where it printed none."""
        return tuple(self.logged.weights) if any(self.logged.weights) else ()

    def weights_said(self):
        """What in the layer's parameters says it has weights (its param { } blocks, or a *_param
        field only a layer with weights sets), in words; "" if nothing does."""
        if self.lp.param:
            n = len(self.lp.param)
            return f"{n} param {{ }} block{'s' if n > 1 else ''}"
        for fd, value in self.lp._msg.ListFields():
            if fd.name.endswith("_param") and fd.message_type is not None and not fd.is_repeated:
                said = [f.name for f, _ in value.ListFields() if f.name in WEIGHT_FIELDS]
                if said:
                    return f"{fd.name} {{ {said[0]} }}"
        return ""
