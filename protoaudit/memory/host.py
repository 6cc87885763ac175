"""Caffe's own C++ objects on the host, as Net::Init and the layers create them.

protoaudit.memory.buffers counts every buffer (blob data and diffs, parameters, a layer's private
buffers). What else Caffe holds is objects: the Net and its vectors and name maps, each Layer
object with its copy of the LayerParameter, each Blob with its SyncedMemory objects and shape
vectors, the members and inner layers some layer types keep, Caffe's random generator. Each is sized
here from BVLC Caffe's source (commit 9b89154: net.cpp, layer.hpp, blob.cpp, syncedmem.cpp,
layers/*.cpp) as the bytes malloc is asked for (libstdc++, protobuf 3.21, x86-64); a protobuf
message's size is derived from its fields (message_size). tests/test_host_objects.py holds every
rule to real Caffe's heap on small nets (tests/data/host_objects), and tests/test_oracle.py the
whole to the byte on the oracle's 314 runs.

Measured rather than derived: the sizeof of Caffe's own classes (NET_BYTES, BLOB, SYNCED_MEMORY,
LAYER, LAYER_BYTES, FILLER, FILLER_BYTES), printed by a C++ program against Caffe's headers (see
tests/data/host_objects/README.md): summing each class's members by hand would only restate the
compiler's layout. Everything is linear in the layers and blobs.

Not modelled: the members of a fork's layer types (they count as a plain Layer<Dtype> with their
LayerParameter, blobs and params; the prefetching data layers of SSD and DeepLab v2 and 3D-Caffe's
N-D pooling are derived from their sources) and of SPP (inner layers); a data layer's thread, RNGs,
database handle and libraries are its own model's (protoaudit/layers/data.py). An RNN's or LSTM's
unrolled net, and DAVSOD's ConvLSTM's, is sized with this module by its class
(protoaudit/layers/recurrent_unrolled.py; tests/data/fork_oracle/davsod measured the ConvLSTM's). The
core classes are BVLC's: a fork built on an older Caffe (caffe-segnet, caffe-fast-rcnn) holds a
little less.
"""
from google.protobuf.descriptor import FieldDescriptor as F

from ..layers.cxx import MAP_NODE, POINTER, SHARED_PTR_BLOCK, STRING, assigned, bits, copied, grown
from .alike import alike


# sizeof, measured with g++ 12 against Caffe's headers (CPU_ONLY), Dtype = float
NET_BYTES = 1016  # Net<float>
BLOB = 80  # Blob<Dtype>: data_, diff_, shape_data_ (shared_ptrs), shape_ (vector<int>), count_, capacity_
SYNCED_MEMORY = 40  # cpu_ptr_, gpu_ptr_, size_, head_, 3 flags, device_
LAYER = 728  # Layer<Dtype>: vptr, LayerParameter (624), phase_, blobs_, param_propagate_down_, loss_
LAYER_PARAMETER = 624  # sizeof(LayerParameter) of BVLC's schema, inside every layer object
LAYER_BYTES = {
    "AbsVal": 728, "Accuracy": 832, "ArgMax": 752, "BNLL": 728, "BatchNorm": 1304, "BatchReindex": 728,
    "Bias": 824, "Clip": 728, "Concat": 744, "ContrastiveLoss": 1048, "Convolution": 1424, "Crop": 968,
    "Data": 1184, "Deconvolution": 1424, "Dropout": 824, "DummyData": 792, "ELU": 728, "Eltwise": 848,
    "Embed": 824, "EuclideanLoss": 808, "Exp": 736, "Filter": 760, "Flatten": 728, "HDF5Data": 848,
    "HDF5Output": 936, "HingeLoss": 728, "Im2col": 1080, "ImageData": 1192, "InfogainLoss": 1064,
    "InnerProduct": 832, "Input": 728, "LRN": 1472, "LSTM": 864, "LSTMUnit": 816, "Log": 744, "MVN": 1056,
    "MemoryData": 1032, "MultinomialLogisticLoss": 728, "PReLU": 976, "Parameter": 728, "Pooling": 944,
    "Power": 744, "RNN": 864, "ReLU": 728, "Reduction": 832, "Reshape": 760, "SPP": 1016, "Scale": 1072,
    "Sigmoid": 728, "SigmoidCrossEntropyLoss": 832, "Silence": 728, "Slice": 768, "Softmax": 904,
    "SoftmaxWithLoss": 896, "Split": 736, "Swish": 824, "TanH": 728, "Threshold": 736, "Tile": 744,
    "WindowData": 1368,
}
# DAVSOD's ConvLSTM Caffe (protoaudit/layers/davsod.py): ConvLSTMLayer<float> and ConvLSTMUnitLayer<float>,
# printed against its headers (928 and 848) less its LayerParameter's 32 bytes beyond BVLC's: LSTMLayer's
# RecurrentLayer with num_output_channels_ and in_shape_ (conv_lstm_layer.hpp), LSTMUnitLayer's members
CONV_LSTM_BYTES, CONV_LSTM_UNIT_BYTES = 896, 816
FILLER_BYTES = {"gaussian": 88}  # GaussianFiller keeps a rand_vec_; every other Filler<Dtype> is 72
FILLER = 72  # vptr, FillerParameter (64)

# Caffe's random generator, made by the first random filler or the first Dropout forward of the
# process (Caffe::rng_stream, common.hpp:128-133; common.cpp:83-92): an RNG (a shared_ptr, 16)
# holding a Generator (16) holding a boost::mt19937 (624 uint32 and an index: 2,504), each new'd
# into a shared_ptr (3 x 24).
RNG_BYTES = 16 + 16 + 2504 + 3 * SHARED_PTR_BLOCK
RANDOM_FILLERS = frozenset({"gaussian", "uniform", "xavier", "msra", "positive_unitball"})

SYNCED = SYNCED_MEMORY + SHARED_PTR_BLOCK  # a shared_ptr<SyncedMemory>'s object and block

_SCALAR = {F.CPPTYPE_BOOL: 1, F.CPPTYPE_INT32: 4, F.CPPTYPE_UINT32: 4, F.CPPTYPE_FLOAT: 4, F.CPPTYPE_ENUM: 4,
           F.CPPTYPE_INT64: 8, F.CPPTYPE_UINT64: 8, F.CPPTYPE_DOUBLE: 8}
_FIXED = (F.TYPE_FLOAT, F.TYPE_DOUBLE, F.TYPE_BOOL, F.TYPE_FIXED32, F.TYPE_FIXED64, F.TYPE_SFIXED32, F.TYPE_SFIXED64)


def blob(axes, elements=1):
    """A Blob after its first Reshape (blob.cpp:22-44): shape_ (exact), shape_data_ (a
    SyncedMemory whose host copy holds the axes), and the data and diff SyncedMemory objects
    when it has elements (their bytes are buffers)."""
    return 4 * axes + SYNCED + 4 * axes + (2 * SYNCED if elements else 0)


def new_blob(axes, elements=1):
    """A Blob made with new and held by a shared_ptr (a net's blob, a parameter)."""
    return BLOB + SHARED_PTR_BLOCK + blob(axes, elements)


_SIZES = {}  # message descriptor -> sizeof (by descriptor: forks name their messages as BVLC does)


def message_size(d):
    """sizeof the class protoc 3.21 generates for message `d`: vptr and metadata (16), then the
    has-bits words and the cached size, then the fields packed by alignment (a repeated message or
    string 24, a repeated scalar 16 (+4 for a packed varint's cached size), a string or message
    pointer 8, a scalar its size), rounded to 8. Holds for every message of BVLC's caffe.proto."""
    size = _SIZES.get(d)
    if size is None:
        has, body = 0, []
        for f in d.fields:
            if f.is_repeated:
                if f.cpp_type in (F.CPPTYPE_STRING, F.CPPTYPE_MESSAGE):
                    body.append(24)
                else:
                    body.append(16)
                    if f.is_packed and f.type not in _FIXED:
                        body.append(4)
            else:
                has += 1
                body.append(8 if f.cpp_type in (F.CPPTYPE_STRING, F.CPPTYPE_MESSAGE) else _SCALAR[f.cpp_type])
        head = 4
        if has:
            head += 4 * ((has + 31) // 32)
            if any(b % 8 == 0 for b in body):
                head = (head + 7) // 8 * 8
        size = _SIZES[d] = 16 + (head + sum(body) + 7) // 8 * 8
    return size


def copy_bytes(msg):
    """Heap bytes of a copy of `msg` (its own object excluded): a string field is a new std::string;
    a repeated field's array holds 8 bytes of header and max(n, 8 / element size) elements (strings
    and messages: n pointers, each element new, a string assigned); a message field is a new object."""
    total = 0
    rules = _RULES
    for f, value in msg.ListFields():
        how, size = rules.get(f) or _rule(f)
        if how is _STRING:
            total += STRING + (len(value) + 1 if len(value) > 15 else 0)
        elif how is _STRINGS:
            total += 8 + (POINTER + STRING) * len(value)
            for v in value:
                if len(v) > 15:
                    total += assigned(len(v))
        elif how is _MESSAGES:
            total += 8 + (POINTER + size) * len(value)
            for v in value:
                total += _sub_bytes(v)
        elif how is _MESSAGE:
            total += size + _sub_bytes(value)
        elif how is _SCALARS:
            total += 8 + size * max(8 // size, len(value))
    return total


_STRING, _MESSAGE, _SCALARS, _STRINGS, _MESSAGES, _PLAIN = range(6)
_RULES = {}  # field descriptor -> (how copy_bytes sizes it, the element's or message's size)
_SUBS = {}  # (message type, its bytes) -> copy_bytes: the same parameters recur from layer to layer


def _rule(f):
    if f.cpp_type == F.CPPTYPE_MESSAGE:
        rule = (_MESSAGES if f.is_repeated else _MESSAGE, message_size(f.message_type))
    elif f.cpp_type == F.CPPTYPE_STRING:
        rule = (_STRINGS if f.is_repeated else _STRING, 0)
    else:
        rule = (_SCALARS if f.is_repeated else _PLAIN, _SCALAR[f.cpp_type])
    _RULES[f] = rule
    return rule


def _sub_bytes(msg):
    key = (msg.DESCRIPTOR, msg.SerializeToString())
    total = _SUBS.get(key)
    if total is None:
        if len(_SUBS) > 100000:
            _SUBS.clear()
        total = _SUBS[key] = copy_bytes(msg)
    return total


def host_bytes(net, *, forward=True, backward=True, shared_params=(), rng_made=False, copies=None):
    """Bytes of Caffe's own objects for `net` once set up, run forward (if `forward`) and backward
    (if `backward`): the Net, every layer, every blob. `shared_params` names layers whose parameter
    data a solver's test net takes from the train net (Net::ShareTrainedLayersWith, when it runs);
    `rng_made`: Caffe's random generator exists already (an earlier net of the process made it).

    The Net's own members (net.hpp, filled by Net::Init, net.cpp:45-267, AppendTop, AppendBottom,
    AppendParam): push_back grows a vector to a power of two, the per-layer vectors are resized to
    the layer count and each layer's inner vectors pushed; names are copied into vectors and maps.
    One pass over the blobs and one over the layers (a net has up to 100,000 of them), kept on the
    net. `copies` (a dict) keeps the size of each LayerParameter's copy by the message and by its
    content, for the other nets of an audit (a train net and its test net share most layers)."""
    total, draws = _kept(net, forward, backward, shared_params, copies)
    return total + (RNG_BYTES if draws and not rng_made else 0)


def draws_random(net, *, forward=True):
    """Whether setting `net` up (or running it forward) makes Caffe's random generator."""
    kept = net.__dict__.get("_host_bytes")
    if kept is not None and kept[0][0] == forward:
        return kept[1][1]
    return _kept(net, forward, True, ())[1]


def _kept(net, forward, backward, shared_params, copies=None):
    key = (forward, backward, frozenset(shared_params))
    kept = net.__dict__.get("_host_bytes")
    if kept is None or kept[0] != key:
        kept = net._host_bytes = (key, _host_bytes(net, forward, backward, shared_params,
                                                   {} if copies is None else copies))
    return kept[1]


def _host_bytes(net, forward, backward, shared_params, copies):
    """(bytes, whether it draws random numbers)"""
    layers, blobs = net.layers, net.blobs
    total = NET_BYTES + SHARED_PTR_BLOCK + assigned(len(net.name))  # name_ = param.name()
    # layers_, layer_names_, layer_need_backward_; blobs_, blob_names_, blob_need_backward_;
    # bottom_vecs_, top_vecs_, bottom_id_vecs_, top_id_vecs_, param_id_vecs_, bottom_need_backward_
    total += (16 + STRING) * (grown(len(layers)) + grown(len(blobs))) + bits(len(layers)) + bits(len(blobs))
    total += (5 * 24 + 40) * len(layers)
    total += _names(b.name for b in blobs)  # blob_names_ and blob_names_index_
    total += _names(node.name for node in layers)  # layer_names_ and layer_names_index_
    for b in blobs:  # each a new Blob, reshaped once
        total += new_blob(len(b.shape), 0 not in b.shape)
    size = capacity = 0  # blob_loss_weights_, resized to each new top's index + 1
    params, inputs, outputs = [], 0, set()
    rng = False
    vectors = _VECTORS
    offset = (message_size(layers[0].lp.DESCRIPTOR) if layers else LAYER_PARAMETER) - LAYER_PARAMETER + SHARED_PTR_BLOCK
    own = {}  # a layer's own objects, by its likeness (protoaudit.memory.alike) and its names' lengths
    for node, number in zip(layers, alike(net)):
        bottoms, tops = node.bottoms, node.tops
        nb, nt = len(bottoms), len(tops)
        total += (vectors[nb] if nb < 65 else 12 * grown(nb) + bits(nb)) + 12 * grown(nt)
        for index in tops:
            if size <= index:
                if index >= capacity:
                    capacity = max(2 * size, index + 1)
                size = index + 1
        outputs.difference_update(bottoms)
        outputs.update(tops if not node.impl.auto_top_blobs else tops[:len(node.lp.top)])
        if node.type == "Input":
            inputs += len(tops)
        lp = node.lp
        key = (number, lp.HasField("name"), len(lp.name), tuple(map(len, lp.bottom)), tuple(map(len, lp.top)))
        layer = own.get(key)
        if layer is None:
            layer = own[key] = _layer_bytes(node, offset, forward, backward, copies)
        size_of, fills, draws = layer
        total += size_of
        if node.params:
            params += node.params
            rng = rng or fills
        if forward:
            if node.name in shared_params:
                total -= SYNCED * sum(1 for p in node.params if p.owner is None)
            rng = rng or draws
    total += 4 * capacity
    # params_, param_display_names_, param_layer_indices_, param_owners_, learnable_param_ids_;
    # the owners' learnable_params_, params_lr_, params_weight_decay_, has_params_lr_/decay_;
    # param_names_index_; ShareWeights: a param sharing another's takes its data and diff
    owners = sum(1 for p in params if p.owner is None)
    total += (16 + STRING + 8 + 4 + 4) * grown(len(params)) + sum(copied(len(p.name)) for p in params)
    total += (8 + 4 + 4) * grown(owners) + 2 * bits(owners) - 2 * SYNCED * (len(params) - owners)
    total += sum(MAP_NODE + copied(len(name)) for name in {p.name for p in params if p.name})
    # net_input_blob_indices_ and net_input_blobs_ (Input tops), net_output_blob_* (unread tops)
    total += 12 * grown(inputs) + 12 * grown(len(outputs))
    return total, rng


def _layer_bytes(node, offset, forward, backward, copies):
    """A layer's own objects (its object, its copy of the LayerParameter, its parameter Blobs, its
    loss_, its members), less the SyncedMemory objects its first forward and backward free by
    sharing (if they run), with whether its setup draws random numbers (a random filler) and
    whether its first forward does: (bytes, fills, draws). `offset`: a fork's LayerParameter's
    size beyond BVLC's, and the layer's shared_ptr block."""
    lp = node.lp
    data, lp_bytes = _copy_bytes(lp, copies)
    total = LAYER_BYTES.get(node.type, LAYER) + offset + lp_bytes
    params = node.params
    if params:  # param_id_vecs_ entry; blobs_, param_propagate_down_, each parameter Blob
        total += 4 * grown(len(params)) + 16 * len(params) + bits(len(params))
        for p in params:
            total += new_blob(len(p.shape), 0 not in p.shape)
    if node.loss_weights and any(node.loss_weights):
        total += _losses(node.loss_weights)
    # a class's own members (a fork's class of a type BVLC has under another class: PSPNet's BN), else the type's
    member = getattr(node.impl, "host_members", None) or MEMBERS.get(node.type)
    if member is not None:
        total += member(node, lp_bytes)
    if forward:
        shares = FORWARD_SHARES.get(node.type)
        if shares is not None:
            total -= SYNCED * shares(node)
        if backward and node.need_backward and node.type in BACKWARD_SHARES:
            total -= SYNCED * BACKWARD_SHARES[node.type](node)
    fills = bool(params) and _random_fill(node, data if data is not None else lp.SerializeToString())
    return total, fills, _random_forward(node)


def _copy_bytes(lp, copies):
    """(lp serialized or None, copy_bytes(lp)), kept in `copies`: by the message itself (a train
    net and its test net are built from the same messages), else by its content. None: not
    serialized here (the message was sized before)."""
    kept = copies.get(id(lp))
    if kept is not None and kept[0] is lp:
        return None, kept[1]
    data = lp.SerializeToString()
    size = copies.get((lp.DESCRIPTOR, data))
    if size is None:
        size = copies[(lp.DESCRIPTOR, data)] = copy_bytes(lp)
    copies[id(lp)] = (lp, size)  # (the message kept with its size: its id stays its own)
    return data, size


def _names(names):
    """A vector of copied names and a map from each distinct name."""
    heap = {}
    total = 0
    for name in names:
        n = len(name)
        if n > 15:
            total += n + 1
            heap[name] = n + 1
        else:
            heap[name] = 0
    return total + sum(heap.values()) + MAP_NODE * len(heap)


# a layer's bottom entries: blob pointers and ids (8 + 4 bytes, pushed back) and need-backward
# flags, for k bottoms (tops have no flags)
_VECTORS = [12 * grown(k) + bits(k) for k in range(65)]


def _object(type_name, lp):
    """A layer object and its shared_ptr block; a fork's LayerParameter (inside it) has its own size."""
    return LAYER_BYTES.get(type_name, LAYER) - LAYER_PARAMETER + message_size(lp.DESCRIPTOR) + SHARED_PTR_BLOCK


def _message(lp, field):
    """The message type of LayerParameter field `field` in the schema that read `lp` (BVLC's if it
    lacks the field)."""
    fd = lp.DESCRIPTOR.fields_by_name.get(field)
    if fd is None:
        from ..read.schema import load_schema

        fd = load_schema("bvlc").LayerParameter.DESCRIPTOR.fields_by_name[field]
    return fd.message_type


def _losses(weights):
    """Layer::loss_ grown by set_loss(top, weight) for each nonzero weight: resize(top + 1)."""
    size = capacity = 0
    for j, weight in enumerate(weights):
        if weight and size <= j:
            if j >= capacity:
                capacity = max(2 * size, j + 1)
            size = j + 1
    return 4 * capacity


def _random_fill(node, data):
    """Whether setting the layer up draws random numbers: a random filler for its parameters
    (`data`: its LayerParameter serialized)."""
    if not any(word in data for word in _RANDOM_WORDS):  # most layers: no need to look closer
        return False
    p = node.impl.lp
    fillers = []
    for field in ("convolution_param", "inner_product_param", "embed_param", "recurrent_param"):
        if p.HasField(field):
            sub = getattr(p, field)
            fillers += [sub.weight_filler, sub.bias_filler] if getattr(sub, "bias_term", True) else [sub.weight_filler]
    for field, name in (("bias_param", "filler"), ("scale_param", "filler"), ("scale_param", "bias_filler"),
                        ("prelu_param", "filler")):
        if p.HasField(field) and getattr(p, field).HasField(name):
            fillers.append(getattr(getattr(p, field), name))
    return any(f.type in RANDOM_FILLERS for f in fillers)


_RANDOM_WORDS = tuple(sorted(name.encode() for name in RANDOM_FILLERS))


def _random_forward(node):
    """Whether the layer's first forward draws random numbers: Dropout and STOCHASTIC pooling in
    TRAIN; DummyData with a random filler (its setup fills only the constant tops,
    dummy_data_layer.cpp:53-90)."""
    if node.type == "DummyData":
        return any(f.type in RANDOM_FILLERS for f in node.impl.lp.dummy_data_param.data_filler)
    if node.impl.ctx.phase != "TRAIN":
        return False
    return node.type == "Dropout" or (node.type == "Pooling" and node.impl.lp.pooling_param.pool == 2)



# --- what each layer type keeps beyond Layer<Dtype>: its member Blobs (the objects; their data
# are buffers unless said), vectors and inner layers; file:line in BVLC's src/caffe/layers/

def _axes(node, j=0):
    return len(node.bottom_shapes[j])


def _conv(node, lp_bytes):
    """base_conv_layer.cpp:17-185: kernel_shape_, stride_, pad_, dilation_ (Blob<int> of
    max(1, spatial axes) ints, written at setup) and conv_input_shape_ (spatial axes + 1 ints);
    col_buffer_ (spatial axes + 1) and, with a bias, bias_multiplier_ (one axis); col_buffer_shape_
    and output_shape_ pushed back."""
    axes = _axes(node)
    n = axes - node.impl.lp.convolution_param.axis % axes - 1
    total = 4 * (blob(1) + 4 * max(n, 1)) + blob(1) + 4 * (n + 1)
    total += blob(n + 1) + 4 * grown(n + 1) + 4 * grown(n)
    return total + (blob(1) if node.impl.lp.convolution_param.bias_term else 0)


def _inner_product(node, lp_bytes):
    """inner_product_layer.cpp:76-81: bias_multiplier_, one axis, with a bias."""
    return blob(1) if node.impl.lp.inner_product_param.bias_term else 0


def _pooling(node, lp_bytes):
    """pooling_layer.cpp:111-120: max_idx_ (MAX, one top) or rand_idx_ (STOCHASTIC, TRAIN), 4 axes.
    3D-Caffe's N-D pooling (its Pooling and PoolingND, `geometry_blobs`) is _nd_pooling."""
    if getattr(node.impl, "geometry_blobs", False):
        return _nd_pooling(node)
    pool = node.impl.lp.pooling_param.pool
    if (pool == 0 and len(node.tops) == 1) or (pool == 2 and node.impl.ctx.phase == "TRAIN"):
        return blob(4)
    return 0


# sizeof 3D-Caffe's PoolingLayer and PoolingNDLayer (their headers' lines 47-67), derived as BVLC's
# Pooling's 944 is from its members: Layer<Dtype>, five Blob<int>, six ints, a bool (padded to 8),
# rand_idx_ and max_idx_
ND_POOLING_BYTES = LAYER + 5 * BLOB + 6 * 4 + 8 + 2 * BLOB


def _nd_pooling(node):
    """3D-Caffe's N-D pooling: its object (ND_POOLING_BYTES, where LAYER_BYTES holds BVLC's Pooling or a
    plain layer); kernel_shape_, pad_, stride_, output_shape_ (n ints) and input_shape_ (n + 1), Blob<int>
    of one axis written at setup and reshape (pooling_layer.cpp:29-170); max_idx_ (MAX, one top) or
    rand_idx_ (STOCHASTIC, either phase), reshaped to the top (:202-210)."""
    p = node.impl.param
    top = node.top_shapes[0]
    n = node.impl.spatial_axes(top)
    total = ND_POOLING_BYTES - LAYER_BYTES.get(node.type, LAYER) + 5 * blob(1) + 4 * (5 * n + 1)
    if (p.pool == 0 and len(node.tops) == 1) or p.pool == 2:
        total += blob(len(top))
    return total


def _batch_norm(node, lp_bytes):
    """batch_norm_layer.cpp:58-92: mean_, variance_, batch_sum_multiplier_, spatial_sum_multiplier_,
    num_by_chans_ (one axis), temp_ and x_norm_ (the bottom's axes). LayerSetUp (:37-46) adds a
    ParamSpec to its LayerParameter for each of the 3 blobs not given one: the repeated field's
    array grows from the copy's (n pointers) to 2n + 1, then takes the new ParamSpecs."""
    total = 5 * blob(1) + 2 * blob(_axes(node))
    if not getattr(node.impl, "adds_statistics_specs", True):  # June 2016's BatchNorm (YOLOv2's port)
        return total
    return total + param_specs_added(node, 3)


def param_specs_added(node, wanted):
    """The ParamSpecs a LayerSetUp adds to its LayerParameter copy until it has `wanted`: the repeated
    field's array grows from the copy's (n pointers) to 2n + 1, then takes the new ParamSpecs."""
    given = len(node.lp.param)
    total, capacity = 0, given
    for size in range(given, wanted):
        if size == capacity:
            capacity = max(2 * capacity + 1, size + 1)
        total += message_size(_message(node.lp, "param"))
    if capacity > given:
        total += POINTER * (capacity - given) + (8 if not given else 0)
    return total


def _scale(node, lp_bytes):
    """scale_layer.cpp:52-80, 106-121: sum_result_ and sum_multiplier_ (one axis), temp_ in place;
    with bias_term, an inner Bias layer (its object, its copy of this LayerParameter with type "Bias"
    and a bias_param holding a filler, its bias_multiplier_; its blob is this layer's second),
    bias_bottom_vec_ and bias_propagate_down_."""
    total = 2 * blob(1) + (blob(_axes(node)) if node.in_place[0] else 0)
    p = node.impl.lp
    if p.scale_param.bias_term:
        bias_param = _message(node.lp, "bias_param")
        total += _object("Bias", node.lp) + _retyped(node.lp, lp_bytes, "Bias")
        if not p.HasField("bias_param"):
            total += message_size(bias_param)
        if not p.bias_param.HasField("filler"):
            total += message_size(bias_param.fields_by_name["filler"].message_type)
            if "scale_param" in node.lp.DESCRIPTOR.fields_by_name:
                total += _sub_bytes(node.lp.scale_param.bias_filler)
        total += 16 + bits(1) + blob(1) + POINTER + bits(1)  # Bias's blobs_, its flags, multiplier
    return total


def _bias(node, lp_bytes):
    """bias_layer.cpp:65: bias_multiplier_, one axis."""
    return blob(1)


def _retyped(lp, lp_bytes, new_type):
    """Bytes of a copy of `lp` (`lp_bytes`) whose type was set to `new_type` (an inner layer's)."""
    return lp_bytes - copied(len(lp.type)) + copied(len(new_type))


def _loss(node, lp_bytes):
    """loss_layer.cpp:12: a LossLayer without loss_weight adds one (a float array of 2)."""
    return 0 if node.impl.lp.loss_weight else 16


def _softmax(node, lp_bytes):
    """softmax_layer.cpp:12-21: sum_multiplier_ (one axis) and scale_ (the bottom's axes)."""
    return blob(1) + blob(_axes(node))


def _softmax_with_loss(node, lp_bytes):
    """softmax_loss_layer.cpp:11-21: an inner Softmax layer made from this LayerParameter (with the
    loss weight LossLayer added), its prob_ top (the bottom's axes) and its own buffers' objects;
    softmax_bottom_vec_, softmax_top_vec_; the inner layer's loss_ (the weight is set on it too)."""
    return (_loss(node, 0) * 2 + _object("Softmax", node.lp) + _retyped(node.lp, lp_bytes, "Softmax")
            + blob(_axes(node)) + _softmax(node, 0) + 2 * POINTER + _losses(node.loss_weights))


def _sigmoid_cross_entropy(node, lp_bytes):
    """sigmoid_cross_entropy_loss_layer.cpp, its header (:49-50): an inner Sigmoid layer made in the
    constructor from this LayerParameter as given, sigmoid_output_ (a new Blob of the bottom's
    axes), sigmoid_bottom_vec_, sigmoid_top_vec_; the inner layer's loss_ when the net gives a
    loss_weight."""
    return (_loss(node, 0) + _object("Sigmoid", node.lp) + lp_bytes
            + new_blob(_axes(node)) + 2 * POINTER + _losses(node.impl.lp.loss_weight))


def _euclidean(node, lp_bytes):
    """euclidean_loss_layer.cpp:15: diff_, shaped like the bottom."""
    return _loss(node, 0) + blob(_axes(node))


def _contrastive(node, lp_bytes):
    """contrastive_loss_layer.cpp:21-25: diff_, diff_sq_, dist_sq_, summer_vec_ (4 axes)."""
    return _loss(node, 0) + 4 * blob(4)


def _infogain(node, lp_bytes):
    """infogain_loss_layer.cpp:13-27, 73: an inner Softmax layer (loss weight 1 set in its copy),
    prob_, sum_rows_H_ (one axis), the two vectors; infogain_ read from a file (its objects)."""
    total = (_loss(node, 0) + _object("Softmax", node.lp) + _retyped(node.lp, lp_bytes, "Softmax")
             + 16 * (not node.impl.lp.loss_weight) + 4 + blob(_axes(node)) + _softmax(node, 0) + 2 * POINTER + blob(1))
    if not node.impl.lp.HasField("softmax_param"):
        total += message_size(_message(node.lp, "softmax_param"))
    return total + (blob(4) if len(node.bottoms) < 3 else 0)


def _crop(node, lp_bytes):
    """crop_layer.cpp:40-56: offsets, src_strides_, dest_strides_ (Blob<int>, one axis; their ints
    are buffers)."""
    return 3 * blob(1)


def _accuracy(node, lp_bytes):
    """accuracy_layer.cpp:43: nums_buffer_ (one axis) with a per-class top."""
    return blob(1) if len(node.tops) > 1 else 0


def _dropout(node, lp_bytes):
    """dropout_layer.cpp:27: rand_vec_, shaped like the bottom."""
    return blob(_axes(node))


def _lrn(node, lp_bytes):
    """lrn_layer.cpp:18-63, 79: ACROSS_CHANNELS keeps scale_ (4 axes). WITHIN_CHANNEL builds five
    inner layers from fresh LayerParameters: Split (into product_input_ and square_input_), Power
    (square, into square_output_), AVE Pooling (into pool_output_), Power (into power_output_) and
    an Eltwise PROD (coeffs_ of 2); each Blob 4 axes, each inner layer's vectors of top pointers."""
    if node.impl.lp.lrn_param.norm_region == 0:
        return blob(4)
    power = message_size(_message(node.lp, "power_param"))
    return (2 * POINTER + _object("Split", node.lp) + 2 * blob(4)
            + 2 * POINTER + _object("Power", node.lp) + power + blob(4)
            + POINTER + _object("Pooling", node.lp) + message_size(_message(node.lp, "pooling_param"))
            + blob(4) + POINTER + _object("Power", node.lp) + power + blob(4)
            + 2 * POINTER + _object("Eltwise", node.lp)
            + message_size(_message(node.lp, "eltwise_param")) + 2 * 4)


def _prelu(node, lp_bytes):
    """prelu_layer.cpp:40-41, 56: multiplier_ and backward_buff_ (one axis); bottom_memory_ in place."""
    return 2 * blob(1) + (blob(_axes(node)) if node.in_place[0] else 0)


def _eltwise(node, lp_bytes):
    """eltwise_layer.cpp:20, 42: coeffs_ (a float per bottom), max_idx_ (the top's axes) for MAX."""
    return 4 * len(node.bottoms) + (blob(len(node.top_shapes[0])) if node.impl.lp.eltwise_param.operation == 2 else 0)


def _slice(node, lp_bytes):
    """slice_layer.cpp:15-16, 72-73: slice_point_ pushed back; one top shares data and diff."""
    return 4 * grown(len(node.impl.lp.slice_param.slice_point)) - (2 * SYNCED if len(node.tops) == 1 else 0)


def _concat(node, lp_bytes):
    """concat_layer.cpp:51-52: a single bottom's data and diff are shared."""
    return -2 * SYNCED if len(node.bottoms) == 1 else 0


def _reshape(node, lp_bytes):
    """reshape_layer.cpp:21-26, 89-90: copy_axes_ (the dims given as 0), pushed back; the top
    shares the bottom's data and diff."""
    zeros = sum(1 for d in node.impl.lp.reshape_param.shape.dim if d == 0)
    return 4 * grown(zeros) - 2 * SYNCED


def _embed(node, lp_bytes):
    """embed_layer.cpp:59: bias_multiplier_, one axis, with a bias."""
    return blob(1) if node.impl.lp.embed_param.bias_term else 0


def _mvn(node, lp_bytes):
    """mvn_layer.cpp:13-23: mean_, variance_, temp_, sum_multiplier_ (4 axes)."""
    return 4 * blob(4)


def _reduction(node, lp_bytes):
    """reduction_layer.cpp:32: sum_multiplier_ (one axis) for SUM and MEAN."""
    return blob(1) if node.impl.lp.reduction_param.operation in (1, 4) else 0


def _swish(node, lp_bytes):
    """swish_layer.hpp:33-35, swish_layer.cpp:13-24: an inner Sigmoid layer from this
    LayerParameter, sigmoid_input_ and sigmoid_output_ (new Blobs, the bottom's axes), two vectors."""
    return (_object("Sigmoid", node.lp) + lp_bytes + 2 * new_blob(_axes(node))
            + 2 * POINTER)


def _im2col(node, lp_bytes):
    """im2col_layer.cpp:20-91: kernel_shape_, stride_, pad_, dilation_ (Blob<int>, written)."""
    n = _axes(node) - node.impl.lp.convolution_param.axis % _axes(node) - 1
    return 4 * (blob(1) + 4 * max(n, 1))


def _dummy_data(node, lp_bytes):
    """dummy_data_layer.cpp:48-71: refill_, and fillers_ with a Filler per data_filler (one
    constant filler when none is given)."""
    fillers = list(node.impl.lp.dummy_data_param.data_filler)
    if len(fillers) <= 1:
        made = [(fillers[0].type, copy_bytes(fillers[0])) if fillers else ("constant", STRING)]
    else:
        made = [(f.type, copy_bytes(f)) for f in fillers]
    return 8 + 16 * len(made) + sum(FILLER_BYTES.get(t, FILLER) + SHARED_PTR_BLOCK + b for t, b in made)


# --- data layers: BasePrefetchingDataLayer's members (base_data_layer.hpp:40-43, 72-77), sizeof
# measured like the classes above (tests/data/host_objects/sizeof.tsv)
DATA_TRANSFORMER = 200  # DataTransformer<float>: vptr, param_, rng_, phase_, data_mean_, mean_values_
BATCH = 160  # Batch<float>: Blob data_, label_
# BlockingQueue<Batch*> (blocking_queue.hpp:37-38, blocking_queue.cpp:10-20): its std::deque's map
# (8 pointers) and first 512-byte node, and a new sync (boost::mutex 40, boost::condition_variable
# 88) in a shared_ptr
QUEUE = 8 * POINTER + 512 + 128 + SHARED_PTR_BLOCK
# the blobs DataLayerSetUp reshapes beside the batches (to one image, 4 axes): transformed_data_
# (data_layer.cpp:38, image_data_layer.cpp:80; never in window_data_layer.cpp), and
# deeplab-public-ver2's ImageSegData's transformed_label_ too (image_seg_data_layer.cpp:106, :113)
TRANSFORMED_BLOBS = {"Data": 1, "ImageData": 1, "WindowData": 0, "AnnotatedData": 1, "ImageSegData": 2,
                     "ImageGtData": 0,  # MS-CNN's: image_gt_data_layer.cpp never reshapes it
                     "DriveData": 0}  # Tsinghua-Tencent 100K's: drive_data_layer.cpp never reshapes it


def _prefetching(node, lp_bytes):
    """A prefetching data layer's members: transform_param_, a copy of its LayerParameter's
    (base_data_layer.cpp:17); data_transformer_, a new DataTransformer and its block (:28-29) with
    its own copy (data_transformer.cpp:18), the mean file's Blob (FromProto, :27-29) and the
    mean_value entries pushed back (:35-37); P Batches, each a new Batch in a shared_ptr held by
    prefetch_ (:39-43), its data_ reshaped to the data top and, with labels, label_ to the label
    top (data_layer.cpp:42-44, 53-55), the Blobs' buffers being prefetch buffers; prefetch_free_
    and prefetch_full_ (QUEUE; up to 63 batches fit their first node); the transformed blobs.
    The forks built on 2015-16 Caffe (SSD, DeepLab v2: `batches_in_array`) keep their batches in
    an array inside the layer object, each of BATCH_BLOBS Blobs (DeepLab v2's Batch has a third,
    dim_; YOLOv2's port's a vector, BATCH_EXTRA_BYTES), where BVLC's layer object (LAYER_BYTES) has
    prefetch_'s vector. The prefetch thread,
    the RNGs and the database handle are the layer's library state (protoaudit/layers/data.py); a
    layer with no prefetching base has none of this."""
    impl = node.impl
    prefetch = getattr(impl, "prefetch", None)
    if prefetch is None:
        return 0
    per_batch = sum(blob(len(shape)) for shape in node.top_shapes)
    if impl.batches_in_array:  # the Batches themselves, in the layer object where BVLC's has a vector
        total = prefetch() * (per_batch + BLOB * impl.BATCH_BLOBS + getattr(impl, "BATCH_EXTRA_BYTES", 0)) - 3 * POINTER
    else:
        total = prefetch() * (per_batch + BATCH + SHARED_PTR_BLOCK + 16)
    tp = node.lp.transform_param
    total += 2 * QUEUE + DATA_TRANSFORMER + SHARED_PTR_BLOCK + 2 * copy_bytes(tp)
    total += TRANSFORMED_BLOBS.get(node.type, 1) * blob(4)
    return total + _mean(impl, len(tp.mean_value))


def _mean(impl, values):
    """A DataTransformer's data_mean_, when a mean file is given and its size known (the Blob
    FromProto makes, of the BlobProto's axes), and mean_values_, one push_back per value."""
    total = 4 * grown(values)
    if impl.lp.transform_param.mean_file and impl.mean_elements():
        total += blob(impl.mean_axes)
    return total


def _data(node, lp_bytes):
    """DataLayer: the prefetching members, and the shared_ptr blocks of db_ and cursor_
    (data_layer.hpp:33-34, data_layer.cpp:18-20); the older forks' DataLayer reads through a
    DataReader instead (_data_reader)."""
    if node.impl.batches_in_array:
        return _prefetching(node, lp_bytes) + _data_reader(node, lp_bytes)
    return _prefetching(node, lp_bytes) + 2 * SHARED_PTR_BLOCK


# sizeof, measured against PSPNet's Caffe's headers (deeplab-public-ver2's data_reader.hpp)
QUEUE_PAIR = 192  # DataReader::QueuePair: two BlockingQueue<Datum*>
READER_BODY = 776  # DataReader::Body: InternalThread, a LayerParameter, a BlockingQueue
READER_MAP_NODE = 80  # a node of map<const string, weak_ptr<Body>>: links 32, the key 32, the weak_ptr 16


def _data_reader(node, lp_bytes):
    """A DataReader's objects (deeplab-public-ver2 data_reader.cpp; SSD's is the same code): its
    QueuePair, new'd into a shared_ptr (:19-20), whose free_ queue takes prefetch x batch_size
    Datum pointers (:44-49: a 512-byte node per 64, the deque's map of 8 grown to 18 when they
    need more than its 5 last slots); the reader's Body (:27), its copy of the LayerParameter
    (:64), its new_queue_pairs_ queue; the map of readers' node, keyed "name:source" (:23-28); in
    the reader's thread, the database's and cursor's shared_ptr blocks and the vector of queue
    pairs (:74-77, :87). The Datums and the thread are the layer's (layers/data.py,
    ThroughDataReader); the queues' nodes as the two threads pass the Datums back and forth are
    not followed."""
    datums = node.impl.lp.data_param.prefetch * node.top_shapes[0][0]
    nodes = datums // 64
    total = QUEUE_PAIR + SHARED_PTR_BLOCK + 2 * QUEUE + 512 * nodes + (18 - 8) * POINTER * (nodes > 4)
    total += READER_BODY + SHARED_PTR_BLOCK + lp_bytes + QUEUE
    key = len(node.impl.lp.name) + 1 + len(node.impl.lp.data_param.source.encode())
    return total + READER_MAP_NODE + copied(key) + 2 * SHARED_PTR_BLOCK + 16


def _box_data(node, lp_bytes):
    """YOLOv2's port's BoxDataLayer (box_data_layer.hpp:36-37): DataLayer's object and members with
    sides_, a vector of one int per label top (box_data_layer.cpp:48-55); each Batch's label tops are
    new Blobs in shared_ptrs pushed into its multi_label_ (cpp:58-73; their shapes are in per_batch),
    the Batch's own label_ never shaped. A layer of another Caffe's BoxData (a Logged one) is a
    plain layer."""
    if getattr(node.impl, "fork", None) != "yolov2":
        return 0
    labels = len(node.tops) - 1
    total = LAYER_BYTES["Data"] - LAYER + 3 * POINTER + _data(node, lp_bytes)
    if labels:
        total += 4 * grown(labels) + node.impl.prefetch() * (labels * (BLOB + SHARED_PTR_BLOCK) + 16 * grown(labels))
    return total


# sizeof YOLOv2's port's ReorgLayer and RegionLossLayer<float>, derived from their headers as ND_POOLING_BYTES is:
# Reorg (reorg_layer.hpp:51-58): an int and a bool (8), seven ints (28, padded to 32), Blob diff_;
# RegionLoss (region_loss_layer.hpp:74-99): six ints, softmax_tree_, a float and an int, four
# floats, an int, a float and an int (padded to 8), biases_, Blob diff_ and real_diff_, the tree t_
# (seven vectors, two ints each padded to 8: 184, tree.hpp:13-24), class_map_ and cls_map_ (a std::map, 48)
REORG_BYTES = LAYER + 8 + 32 + BLOB
REGION_LOSS_BYTES = LAYER + 24 + STRING + 8 + 16 + 16 + 3 * POINTER + 2 * BLOB + (7 * 3 * POINTER + 16) + STRING + 48


def _reorg(node, lp_bytes):
    """Reorg's object and diff_, shaped as the bottom at setup (reorg_layer.cpp:20)."""
    if getattr(node.impl, "fork", None) != "yolov2":
        return 0
    return REORG_BYTES - LAYER + blob(4)


def _region_loss(node, lp_bytes):
    """RegionLoss's object; biases_, one push_back per value (region_loss_layer.cpp:172-174); diff_ and
    real_diff_ shaped as the predictions (cpp:190-191); softmax_tree_ and class_map_ copied from the
    parameters (cpp:134, 138). A softmax_tree or class_map file read into t_ and cls_map_ is not counted."""
    if getattr(node.impl, "fork", None) != "yolov2":
        return 0
    p = node.lp.region_loss_param
    return (REGION_LOSS_BYTES - LAYER + 4 * grown(len(p.biases)) + 2 * blob(_axes(node))
            + copied(len(p.softmax_tree.encode())) + copied(len(p.class_map.encode())))


def _window_data(node, lp_bytes):
    """WindowDataLayer: the prefetching members, and its own data_mean_ and mean_values_
    (window_data_layer.cpp:192-214: a second FromProto of the mean file; a single mean_value is
    pushed back once more per further channel). Its window lists are not counted (data.py)."""
    values = len(node.lp.transform_param.mean_value)
    channels = node.top_shapes[0][1]
    return _prefetching(node, lp_bytes) + _mean(node.impl, channels if values == 1 else values)


def _hdf5_data(node, lp_bytes):
    """HDF5DataLayer: hdf_blobs_, resized to the tops (hdf5_data_layer.cpp:36), each a new Blob in
    a shared_ptr (:42) reshaped to its dataset's axes by hdf5_load_nd_dataset."""
    return 16 * len(node.tops) + sum(new_blob(len(shape)) for shape in node.top_shapes)


MEMBERS = {
    "Data": _data, "DriveData": _data, "ImageData": _prefetching, "WindowData": _window_data, "AnnotatedData": _prefetching,
    "ImageSegData": _prefetching, "HDF5Data": _hdf5_data, "BoxData": _box_data, "Reorg": _reorg,
    "RegionLoss": _region_loss,
    "Convolution": _conv, "Deconvolution": _conv, "InnerProduct": _inner_product, "Pooling": _pooling,
    "PoolingND": _pooling,
    "BatchNorm": _batch_norm, "Scale": _scale, "Bias": _bias, "Softmax": _softmax,
    "SoftmaxWithLoss": _softmax_with_loss, "SigmoidCrossEntropyLoss": _sigmoid_cross_entropy,
    "EuclideanLoss": _euclidean, "ContrastiveLoss": _contrastive, "InfogainLoss": _infogain,
    "HingeLoss": _loss, "MultinomialLogisticLoss": _loss, "Accuracy": _accuracy, "Dropout": _dropout,
    "LRN": _lrn, "PReLU": _prelu, "Eltwise": _eltwise, "Slice": _slice, "Concat": _concat, "Reshape": _reshape,
    "Crop": _crop,     "Embed": _embed, "MVN": _mvn, "Reduction": _reduction, "Swish": _swish, "Im2col": _im2col,
    "DummyData": _dummy_data, "LSTMUnit": lambda node, lp_bytes: blob(3),  # X_acts_ (lstm_unit_layer.cpp:37)
    # the unrolled net an RNN or LSTM builds and holds, sized by the layer's class (layers/recurrent.py)
    "RNN": lambda node, lp_bytes: node.impl.inner_objects(node)[0],
    "LSTM": lambda node, lp_bytes: node.impl.inner_objects(node)[0],
    # DAVSOD's ConvLSTM: its object (CONV_LSTM_BYTES), its unrolled net as an LSTM's, and in_shape_, x's axes
    # pushed back one by one (conv_lstm_layer.cpp:40-43: a vector<int> grown to 8 for 5 axes); ConvLSTMUnit's
    # object and X_acts_, shaped like the gates' 5 axes (conv_lstm_unit_layer.cpp:48), where LSTMUnit's has 3
    "ConvLSTM": lambda node, lp_bytes: (CONV_LSTM_BYTES - LAYER + node.impl.inner_objects(node)[0]
                                        + 4 * grown(len(node.bottom_shapes[0]))),
    "ConvLSTMUnit": lambda node, lp_bytes: CONV_LSTM_UNIT_BYTES - LAYER + blob(len(node.bottom_shapes[1])),
}

# SyncedMemory objects a layer's first forward frees by sharing another blob's: each Split top takes
# the bottom's data (split_layer.cpp:29), Flatten's top too (flatten_layer.cpp:32), Parameter's top
# its blob's data and diff (parameter_layer.hpp:33-36), a second top of
# SoftmaxWithLoss or InfogainLoss takes prob_'s data, LRN's inner Split its two tops'.
FORWARD_SHARES = {
    "Split": lambda node: len(node.tops),
    "Flatten": lambda node: 1,
    "Parameter": lambda node: 2,
    "SoftmaxWithLoss": lambda node: len(node.tops) - 1,
    "InfogainLoss": lambda node: len(node.tops) - 1,
    "LRN": lambda node: 2 * (node.impl.lp.lrn_param.norm_region == 1),
    "RNN": lambda node: node.impl.inner_objects(node)[1],  # its unrolled net's, and exposed tops'
    "LSTM": lambda node: node.impl.inner_objects(node)[1],
    "ConvLSTM": lambda node: node.impl.inner_objects(node)[1],
}
# and its first backward: Flatten's bottom takes the top's diff (flatten_layer.cpp:38)
BACKWARD_SHARES = {"Flatten": lambda node: 1}
