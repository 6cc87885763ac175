"""PoseNet's Caffe (alexgkendall/caffe-posenet 62aafbd: Kendall, Grimes and Cipolla, ICCV 2015), as its
sources shape its layers.

The fork is BVLC Caffe of January 2016 (cff6f3d9) with one commit of its own (c0d801cd) that changes
three things: its Data layer gives the record's float_data as the label, (batch, float_data_size, 1,
1), where a record carries any, else BVLC's one label per record (src/caffe/layers/data_layer.cpp:44-67,
110-116); its Dropout draws its mask in TEST as in TRAIN under dropout_param's sample_weights_test
(dropout_layer.cpp:37, :55, dropout_layer.cu:23, :53: caffe-segnet's and caffe-enet's field, the same
code as caffe-enet's); and caffe.proto gains that field. Its BasePrefetchingDataLayer is the one of
its time: PREFETCH_COUNT = 3 batches of data_ and label_ in an array, copied into the tops
(include/caffe/layers/base_data_layer.hpp:50-80, base_data_layer.cpp:40-125), its DataLayer reading
through a DataReader (data_layer.hpp:34, data_reader.cpp:19-20), its ImageData reading "name label"
pairs with `infile >> filename >> label` (image_data_layer.cpp:42). The rest of the net is counted
as BVLC 9b89154's layers, as for the other forks here.

Where the database is not on this machine, the label's width K is the records': it is taken from the
net where the net pins it exactly, said as an assumption (Data.label_shape); else the label is BVLC's
one value per record, and a layer that wants more stops as in BVLC's Caffe.
"""
from . import deeplab, enet, ssd
from .base import carry, register
from .data import Data as BvlcData
from .data import ThroughDataReader

FORK = "posenet"

carry(__name__, FORK, ssd.SSDWindowData, enet.Dropout)


def _readers(layers, blob):
    """The (layer, bottom index) pairs that read `blob`, through the Splits Caffe inserts; None where
    a layer rewrites it in place (its width could then change on the way)."""
    found = []
    for lp in layers:
        for i, bottom in enumerate(lp.bottom):
            if bottom != blob:
                continue
            if blob in lp.top:
                return None
            if lp.type == "Split":
                below = [_readers(layers, top) for top in lp.top]
                if any(b is None for b in below):
                    return None
                found += [r for b in below for r in b]
            else:
                found.append((lp, i))
    return found


def _maker(layers, blob):
    """The layer that makes `blob`, through Splits; None where none or several (in place) do."""
    makers = [lp for lp in layers if blob in lp.top]
    if len(makers) != 1:
        return None
    if makers[0].type == "Split":
        return _maker(layers, makers[0].bottom[0])
    return makers[0]


def _width(layers, blob):
    """(width, layer) of `blob` where its maker fixes it whatever its bottoms: an InnerProduct on axis 1,
    (N, num_output) (inner_product_layer.cpp: top_shape = bottom's first `axis` dims + N_); else None."""
    maker = _maker(layers, blob)
    if maker is None or maker.type != "InnerProduct":
        return None
    p = maker.inner_product_param
    if p.axis != 1 or not p.num_output:
        return None
    return p.num_output, maker


def _piece_widths(layers, piece):
    """The widths a piece of the label must have for the EuclideanLosses that read it (euclidean_loss_layer.cpp
    Reshape: CHECK_EQ of the two bottoms' count(1)), with the words that say why: [(width, why)]; None
    where a reader is no EuclideanLoss, or its other bottom's width is not fixed by its maker."""
    readers = _readers(layers, piece)
    if not readers:
        return None
    widths = []
    for lp, i in readers:
        if lp.type != "EuclideanLoss" or len(lp.bottom) != 2:
            return None
        other = lp.bottom[1 - i]
        known = _width(layers, other)
        if known is None:
            return None
        n, maker = known
        widths.append((n, f"EuclideanLoss '{lp.name}' compares it with '{other}', the {n} outputs of InnerProduct "
                          f"'{maker.name}'"))
    return widths


def pinned_width(layers, label):
    """(K, why) where the net pins the label's width K exactly: every layer that reads the label
    (through Splits) is a Slice on axis 1 (slice_dim 1, or axis 1: channels() of (batch, K, 1, 1)),
    and a piece whose width follows from K (the last after the slice points, any piece of an even
    split) is read only by EuclideanLosses against InnerProduct outputs that agree on its width;
    every Slice gives the same K. Else None: the label is left as BVLC's."""
    readers = _readers(layers, label)
    if not readers:
        return None
    found = set()
    reasons = []
    for lp, _ in readers:
        if lp.type != "Slice" or len(lp.bottom) != 1 or len(lp.top) < 2:
            return None
        p = lp.slice_param
        axis = p.slice_dim if p.HasField("slice_dim") else p.axis
        if axis not in (1, -3):
            return None
        points = list(p.slice_point)
        if points:
            if len(points) != len(lp.top) - 1:
                return None
            widths = _piece_widths(layers, lp.top[-1])
            if not widths or len({w for w, _ in widths}) != 1:
                return None
            k = points[-1] + widths[0][0]
            reasons.append(f"Slice '{lp.name}' cuts it at {', '.join(map(str, points))} and its last piece "
                           f"'{lp.top[-1]}' is {widths[0][0]} wide ({'; '.join(why for _, why in widths)}): "
                           f"{points[-1]} + {widths[0][0]}")
        else:
            each = {w for top in lp.top for w, _ in (_piece_widths(layers, top) or [])}
            if len(each) != 1:
                return None
            w = each.pop()
            k = w * len(lp.top)
            reasons.append(f"Slice '{lp.name}' cuts it into {len(lp.top)} equal pieces, read by EuclideanLosses "
                           f"against {w}-wide InnerProduct outputs: {len(lp.top)} x {w}")
        found.add(k)
    if len(found) != 1:
        return None
    return found.pop(), "; ".join(reasons)


@register("Data", fork=FORK)
class Data(ssd.ForkPrefetching, ThroughDataReader, BvlcData):
    """DataLayer (data_layer.cpp): BVLC's record and transform (InferBlobShape of the first record,
    :30-37), through the DataReader (:17, :30), in the fork's prefetching base (3 batches, copied).
    The label (:44-67): where the first record carries float_data, (batch, float_data_size, 1, 1) for
    every prefetch batch and the top (legacy 4-axis Reshape, :54-57), filled from each record's
    float_data (:110-113); else (batch,), the record's label. Without the database, K is the width
    the net pins exactly (pinned_width), said with the --input that gives the records' own; where the
    net does not pin it, BVLC's one label per record."""

    label_floats = 0  # the record's float_data values, where the label is them

    def label_shape(self, batch):
        record = self.record
        if record is not None:
            k = record.float_values
            if k:
                self.label_floats = k
                self.label_origin = (f"the layer's batch size and the first record's {k} float_data values "
                                     "(data_layer.cpp:45-57)")
                return (batch, k, 1, 1)
            return (batch,)
        label = self.lp.top[1]
        if label in self.ctx.inputs or self.stored is not None:
            return (batch,)  # given (--input), or a database of Caffe's examples (one label per record)
        pinned = pinned_width(self.ctx.layers, label)
        if pinned is None:
            return (batch,)
        k, why = pinned
        self.label_floats = k
        self.label_origin = f"assumed: {k} float_data values per record, the width the net takes"
        self.assume(f"source '{self.lp.data_param.source}' is not on this machine; PoseNet's Data layer gives "
                    f"each record's float_data as the label, (batch, float_data_size, 1, 1) (data_layer.cpp:45-57), "
                    f"and the net takes a label of {k} values: {why}",
                    f"--input {label}={batch}x{k}x1x1 (your records' float_data values)")
        return (batch, k, 1, 1)

    def datum_bytes(self, run):
        """The DataReader's Datum with the record's float_data too, where the label is assumed
        (read: the record's own count, ThroughDataReader)."""
        size = super().datum_bytes(run)
        if self.record is None and self.label_floats:
            size += 8 + 4 * self.label_floats
        return size


@register("ImageData", fork=FORK)
class ImageData(ssd.ForkPrefetching, deeplab.ImageDataV2):
    """ImageDataLayer: BVLC's, in the fork's prefetching base (3 batches, ForkPrefetching first), its
    list read as whitespace-separated "name label" pairs (image_data_layer.cpp:42), as
    deeplab-public-ver2's."""
