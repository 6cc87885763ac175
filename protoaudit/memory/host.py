"""Caffe's own C++ objects on the host, as Net::Init and the layers create them.

protoaudit.memory.buffers counts every buffer (blob data and diffs, parameters, a layer's private
buffers). What else Caffe holds is objects: the Net and its vectors and name maps, each Layer
object with its copy of the LayerParameter, each Blob with its SyncedMemory objects and shape
vectors, the members and inner layers some layer types keep. Each is sized here from BVLC Caffe's
source (commit 9b89154: net.cpp, layer.hpp, blob.cpp, syncedmem.cpp, layers/*.cpp) as the bytes
malloc is asked for (libstdc++, protobuf 3.21, x86-64), and every rule is held against real Caffe's
heap in tests/test_host_objects.py (tests/data/host_objects).

The sizeof of each class is measured (a C++ program against Caffe's headers, see
tests/data/host_objects/README.md): LAYER_BYTES, FILLER_BYTES, NET_BYTES, BLOB, SYNCED_MEMORY.
The one other measured constant is RNG_BYTES. Everything is linear in the layers and blobs.

Layer types of forks (and BVLC types whose members are not modelled: RNN, LSTM, SPP, which build
inner nets or layers) count as a plain Layer<Dtype> with their LayerParameter, blobs and params.
"""
from google.protobuf.descriptor import FieldDescriptor as F

from ..layers.base import count

SHARED_PTR_BLOCK = 24  # shared_ptr<T>(new T): _Sp_counted_ptr, a vptr, two counts and the pointer
STRING = 32  # std::string (libstdc++): pointer, length, 16-byte inline buffer
MAP_NODE = 72  # a std::map<string, int> node: colour and 3 links (32), pair<const string, int> (40)
POINTER = 8

# sizeof, measured with g++ 12 against Caffe's headers (CPU_ONLY), Dtype = float
NET_BYTES = 1016  # Net<float>
BLOB = 80  # Blob<Dtype>: data_, diff_, shape_data_ (shared_ptrs), shape_ (vector<int>), count_, capacity_
SYNCED_MEMORY = 40  # cpu_ptr_, gpu_ptr_, size_, head_, 3 flags, device_
LAYER = 728  # Layer<Dtype>: vptr, LayerParameter (624), phase_, blobs_, param_propagate_down_, loss_
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
FILLER_BYTES = {"gaussian": 88}  # GaussianFiller keeps a rand_vec_; every other Filler<Dtype> is 72
FILLER = 72  # vptr, FillerParameter (64)

# Measured: Caffe's random generator (Caffe::RNG: a boost::mt19937 of 2,504 bytes and its holders),
# made by the first random filler or the first Dropout forward of the process.
RNG_BYTES = 2608
RANDOM_FILLERS = frozenset({"gaussian", "uniform", "xavier", "msra", "positive_unitball"})

SYNCED = SYNCED_MEMORY + SHARED_PTR_BLOCK  # a shared_ptr<SyncedMemory>'s object and block

_SCALAR = {F.CPPTYPE_BOOL: 1, F.CPPTYPE_INT32: 4, F.CPPTYPE_UINT32: 4, F.CPPTYPE_FLOAT: 4, F.CPPTYPE_ENUM: 4,
           F.CPPTYPE_INT64: 8, F.CPPTYPE_UINT64: 8, F.CPPTYPE_DOUBLE: 8}
_FIXED = (F.TYPE_FLOAT, F.TYPE_DOUBLE, F.TYPE_BOOL, F.TYPE_FIXED32, F.TYPE_FIXED64, F.TYPE_SFIXED32, F.TYPE_SFIXED64)


def copied(n):
    """Heap bytes of a std::string copied from one of n characters (up to 15 fit inline)."""
    return n + 1 if n > 15 else 0


def assigned(n):
    """Heap bytes of an empty std::string assigned n characters: _M_create doubles the old
    capacity (15) when the new one is below twice it."""
    return 0 if n <= 15 else 31 if n < 30 else n + 1


def grown(n):
    """The capacity push_back leaves a vector of n elements: 0, 1, 2, 4, 8, ..."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def bits(n):
    """Bytes of a vector<bool> of n elements: whole 64-bit words, doubling as it grows."""
    return 0 if n <= 0 else max(64, grown(n)) // 8


def blob(axes, elements=1):
    """A Blob after its first Reshape (blob.cpp:22-44): shape_ (exact), shape_data_ (a
    SyncedMemory whose host copy holds the axes), and the data and diff SyncedMemory objects
    when it has elements (their bytes are buffers)."""
    return 4 * axes + SYNCED + 4 * axes + (2 * SYNCED if elements else 0)


def new_blob(axes, elements=1):
    """A Blob made with new and held by a shared_ptr (a net's blob, a parameter)."""
    return BLOB + SHARED_PTR_BLOCK + blob(axes, elements)


_SIZES = {}


def message_size(d):
    """sizeof the class protoc 3.21 generates for message `d`: vptr and metadata (16), then the
    has-bits words and the cached size, then the fields packed by alignment (a repeated message or
    string 24, a repeated scalar 16 (+4 for a packed varint's cached size), a string or message
    pointer 8, a scalar its size), rounded to 8. Holds for every message of BVLC's caffe.proto."""
    size = _SIZES.get(d.full_name)
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
        size = _SIZES[d.full_name] = 16 + (head + sum(body) + 7) // 8 * 8
    return size


def copy_bytes(msg):
    """Heap bytes of a copy of `msg` (its own object excluded): a string field is a new std::string;
    a repeated field's array holds 8 bytes of header and max(n, 8 / element size) elements (strings
    and messages: n pointers, each element new, a string assigned); a message field is a new object."""
    total = 0
    for f, value in msg.ListFields():
        if f.is_repeated:
            n = len(value)
            if f.cpp_type == F.CPPTYPE_MESSAGE:
                total += 8 + POINTER * n + sum(message_size(f.message_type) + copy_bytes(v) for v in value)
            elif f.cpp_type == F.CPPTYPE_STRING:
                total += 8 + POINTER * n + sum(STRING + assigned(len(v)) for v in value)
            else:
                size = _SCALAR[f.cpp_type]
                total += 8 + size * max(8 // size, n)
        elif f.cpp_type == F.CPPTYPE_MESSAGE:
            total += message_size(f.message_type) + copy_bytes(value)
        elif f.cpp_type == F.CPPTYPE_STRING:
            total += STRING + copied(len(value))
    return total


def host_bytes(net, *, forward=True, backward=True, shared_params=(), rng_made=False):
    """Bytes of Caffe's own objects for `net` once set up, run forward (if `forward`) and backward
    (if `backward`): the Net, every layer, every blob. `shared_params` names layers whose parameter
    data a solver's test net takes from the train net (Net::ShareTrainedLayersWith, when it runs);
    `rng_made`: Caffe's random generator exists already (an earlier net of the process made it)."""
    total = NET_BYTES + SHARED_PTR_BLOCK + _net_vectors(net)
    total += sum(new_blob(len(b.shape), count(b.shape)) for b in net.blobs)
    rng = rng_made
    for node in net.layers:
        total += _layer(node)
        member = MEMBERS.get(node.type)
        if member is not None:
            total += member(node)
        rng = rng or _random_fill(node)
        if forward:
            total -= SYNCED * FORWARD_SHARES.get(node.type, _none)(node)
            rng = rng or _random_forward(node)
            if backward and node.need_backward:
                total -= SYNCED * BACKWARD_SHARES.get(node.type, _none)(node)
            if node.name in shared_params:
                total -= SYNCED * sum(1 for p in node.params if p.owner is None)
    return total + (RNG_BYTES if rng and not rng_made else 0)


def _none(node):
    return 0


def _net_vectors(net):
    """Net's own members (net.hpp, filled by Net::Init, net.cpp:45-267, AppendTop/Bottom/Param):
    push_back grows a vector to a power of two; the per-layer vectors are resized to the layer
    count, each layer's inner vectors pushed; names are copied into vectors and index maps."""
    layers, blobs = net.layers, net.blobs
    n_layers, n_blobs = len(layers), len(blobs)
    total = assigned(len(net.name))  # name_ = param.name()
    # layers_, layer_names_, layer_names_index_, layer_need_backward_
    total += (16 + STRING) * grown(n_layers) + bits(n_layers)
    names = {}
    for node in layers:
        names[node.name] = copied(len(node.name))
        total += names[node.name]
    total += sum(names.values()) + MAP_NODE * len(names)
    # blobs_, blob_names_, blob_names_index_, blob_need_backward_
    total += (16 + STRING) * grown(n_blobs) + bits(n_blobs)
    names = {}
    for b in blobs:
        names[b.name] = copied(len(b.name))
        total += names[b.name]
    total += sum(names.values()) + MAP_NODE * len(names)
    # bottom_vecs_, top_vecs_ (Blob*), bottom_id_vecs_, top_id_vecs_, param_id_vecs_ (int),
    # bottom_need_backward_ (vector<bool>), each resized to the layer count; their inner vectors
    total += (5 * 24 + 40) * n_layers
    size = capacity = 0  # blob_loss_weights_, resized to each new top's index + 1
    params, inputs = [], 0
    for node in layers:
        nb, nt = len(node.bottoms), len(node.tops)
        total += 12 * grown(nb) + bits(nb) + 12 * grown(nt) + 4 * grown(len(node.params))
        for index in node.tops:
            if size <= index:
                if index >= capacity:
                    capacity = max(2 * size, index + 1)
                size = index + 1
        params += node.params
        if node.type == "Input":
            inputs += nt
    total += 4 * capacity
    # params_, param_display_names_, param_layer_indices_, param_owners_, learnable_param_ids_;
    # the owners' learnable_params_, params_lr_, params_weight_decay_, has_params_lr_/decay_
    owners = sum(1 for p in params if p.owner is None)
    total += (16 + STRING + 8 + 4 + 4) * grown(len(params)) + sum(copied(len(p.name)) for p in params)
    total += (8 + 4 + 4) * grown(owners) + 2 * bits(owners)
    total += sum(MAP_NODE + copied(len(name)) for name in {p.name for p in params if p.name})
    # net_input_blob_indices_ and net_input_blobs_ (Input tops), net_output_blob_* (unconsumed tops)
    total += 12 * grown(inputs) + 12 * grown(len(_outputs(net)))
    # ShareWeights: a param that shares another's takes its data and diff
    return total - 2 * SYNCED * sum(1 for p in params if p.owner is not None)


def _outputs(net):
    """The tops no later layer reads (Net::Init's available_blobs), anonymous tops apart."""
    available = set()
    for node in net.layers:
        for index in node.bottoms:
            available.discard(net.blobs[index].name)
        available.update(net.blobs[index].name for index in node.tops[:len(node.lp.top)])
    return available


def _layer(node):
    """What every layer holds (layer.hpp): its object, made by the registry's creator into a
    shared_ptr; its copy of the LayerParameter; blobs_ (resized to the parameter count) with each
    parameter Blob; param_propagate_down_; loss_ (set_loss for each top with a loss weight)."""
    total = LAYER_BYTES.get(node.type, LAYER) + SHARED_PTR_BLOCK + copy_bytes(node.lp)
    if node.params:
        total += 16 * len(node.params) + bits(len(node.params))
        total += sum(new_blob(len(p.shape), count(p.shape)) for p in node.params)
    return total + _losses(node.loss_weights)


def _losses(weights):
    """Layer::loss_ grown by set_loss(top, weight) for each nonzero weight: resize(top + 1)."""
    size = capacity = 0
    for j, weight in enumerate(weights):
        if weight and size <= j:
            if j >= capacity:
                capacity = max(2 * size, j + 1)
            size = j + 1
    return 4 * capacity


def _random_fill(node):
    """Whether setting the layer up draws random numbers (a random filler for its parameters)."""
    if not node.params:
        return False
    lp = node.lp
    for field in ("convolution_param", "inner_product_param", "embed_param", "recurrent_param"):
        if lp.HasField(field):
            p = getattr(lp, field)
            if p.weight_filler.type in RANDOM_FILLERS or (p.HasField("bias_filler") and p.bias_filler.type in RANDOM_FILLERS):
                return True
    for field, sub in (("bias_param", "filler"), ("scale_param", "filler"), ("scale_param", "bias_filler"),
                       ("prelu_param", "filler")):
        if lp.HasField(field) and getattr(lp, field).HasField(sub) and getattr(getattr(lp, field), sub).type in RANDOM_FILLERS:
            return True
    return False


def _random_forward(node):
    """Whether the layer's first forward draws random numbers: Dropout, and STOCHASTIC pooling,
    in TRAIN."""
    if node.impl.ctx.phase != "TRAIN":
        return False
    return node.type == "Dropout" or (node.type == "Pooling" and node.lp.pooling_param.pool == 2)



# --- what each layer type keeps beyond Layer<Dtype>: its member Blobs (the objects; their data
# are buffers unless said), vectors and inner layers; file:line in BVLC's src/caffe/layers/

def _axes(node, j=0):
    return len(node.bottom_shapes[j])


def _conv(node):
    """base_conv_layer.cpp:17-185: kernel_shape_, stride_, pad_, dilation_ (Blob<int> of
    max(1, spatial axes) ints, written at setup) and conv_input_shape_ (spatial axes + 1 ints);
    col_buffer_ (spatial axes + 1) and, with a bias, bias_multiplier_ (one axis); col_buffer_shape_
    and output_shape_ pushed back."""
    axes = _axes(node)
    n = axes - node.lp.convolution_param.axis % axes - 1
    total = 4 * (blob(1) + 4 * max(n, 1)) + blob(1) + 4 * (n + 1)
    total += blob(n + 1) + 4 * grown(n + 1) + 4 * grown(n)
    return total + (blob(1) if node.lp.convolution_param.bias_term else 0)


def _inner_product(node):
    """inner_product_layer.cpp:76-81: bias_multiplier_, one axis, with a bias."""
    return blob(1) if node.lp.inner_product_param.bias_term else 0


def _pooling(node):
    """pooling_layer.cpp:111-120: max_idx_ (MAX, one top) or rand_idx_ (STOCHASTIC, TRAIN), 4 axes."""
    pool = node.lp.pooling_param.pool
    if (pool == 0 and len(node.tops) == 1) or (pool == 2 and node.impl.ctx.phase == "TRAIN"):
        return blob(4)
    return 0


def _batch_norm(node):
    """batch_norm_layer.cpp:58-92: mean_, variance_, batch_sum_multiplier_, spatial_sum_multiplier_,
    num_by_chans_ (one axis), temp_ and x_norm_ (the bottom's axes). LayerSetUp (:37-46) adds a
    ParamSpec to its LayerParameter for each of the 3 blobs not given one: the repeated field's
    array grows from the copy's (n pointers) to 2n + 1, then takes the new ParamSpecs."""
    total = 5 * blob(1) + 2 * blob(_axes(node))
    given = len(node.lp.param)
    capacity = given
    for size in range(given, 3):
        if size == capacity:
            capacity = max(2 * capacity + 1, size + 1)
        total += message_size(node.lp.DESCRIPTOR.fields_by_name["param"].message_type)
    if capacity > given:
        total += POINTER * (capacity - given) + (8 if not given else 0)
    return total


def _scale(node):
    """scale_layer.cpp:52-80, 106-121: sum_result_ and sum_multiplier_ (one axis), temp_ in place;
    with bias_term, an inner Bias layer (its object, its copy of this LayerParameter with type "Bias"
    and a bias_param holding a filler, its bias_multiplier_; its blob is this layer's second),
    bias_bottom_vec_ and bias_propagate_down_."""
    total = 2 * blob(1) + (blob(_axes(node)) if node.in_place[0] else 0)
    if node.lp.scale_param.bias_term:
        bias_param = node.lp.DESCRIPTOR.fields_by_name["bias_param"].message_type
        filler = bias_param.fields_by_name["filler"].message_type
        total += LAYER_BYTES["Bias"] + SHARED_PTR_BLOCK + _retyped(node.lp, "Bias")
        if not node.lp.HasField("bias_param"):
            total += message_size(bias_param)
        if not node.lp.bias_param.HasField("filler"):
            total += message_size(filler) + copy_bytes(node.lp.scale_param.bias_filler)
        total += 16 + bits(1) + blob(1) + POINTER + bits(1)  # Bias's blobs_, its flags, multiplier
    return total


def _bias(node):
    """bias_layer.cpp:65: bias_multiplier_, one axis."""
    return blob(1)


def _retyped(lp, new_type):
    """Bytes of a copy of `lp` whose type was set to `new_type` (an inner layer's parameter)."""
    return copy_bytes(lp) - copied(len(lp.type)) + copied(len(new_type))


def _loss(node):
    """loss_layer.cpp:12: a LossLayer without loss_weight adds one (a float array of 2)."""
    return 0 if node.lp.loss_weight else 16


def _softmax(node):
    """softmax_layer.cpp:12-21: sum_multiplier_ (one axis) and scale_ (the bottom's axes)."""
    return blob(1) + blob(_axes(node))


def _softmax_with_loss(node):
    """softmax_loss_layer.cpp:11-21: an inner Softmax layer made from this LayerParameter (with the
    loss weight LossLayer added), its prob_ top (the bottom's axes) and its own buffers' objects;
    softmax_bottom_vec_, softmax_top_vec_; the inner layer's loss_ (the weight is set on it too)."""
    return (_loss(node) * 2 + LAYER_BYTES["Softmax"] + SHARED_PTR_BLOCK + _retyped(node.lp, "Softmax")
            + blob(_axes(node)) + _softmax(node) + 2 * POINTER + _losses(node.loss_weights))


def _sigmoid_cross_entropy(node):
    """sigmoid_cross_entropy_loss_layer.cpp, its header (:49-50): an inner Sigmoid layer made in the
    constructor from this LayerParameter as given, sigmoid_output_ (a new Blob of the bottom's
    axes), sigmoid_bottom_vec_, sigmoid_top_vec_; the inner layer's loss_ when the net gives a
    loss_weight."""
    return (_loss(node) + LAYER_BYTES["Sigmoid"] + SHARED_PTR_BLOCK + copy_bytes(node.lp)
            + new_blob(_axes(node)) + 2 * POINTER + _losses(node.lp.loss_weight))


def _euclidean(node):
    """euclidean_loss_layer.cpp:15: diff_, shaped like the bottom."""
    return _loss(node) + blob(_axes(node))


def _contrastive(node):
    """contrastive_loss_layer.cpp:21-25: diff_, diff_sq_, dist_sq_, summer_vec_ (4 axes)."""
    return _loss(node) + 4 * blob(4)


def _infogain(node):
    """infogain_loss_layer.cpp:13-27, 73: an inner Softmax layer (loss weight 1 set in its copy),
    prob_, sum_rows_H_ (one axis), the two vectors; infogain_ read from a file (its objects)."""
    total = (_loss(node) + LAYER_BYTES["Softmax"] + SHARED_PTR_BLOCK + _retyped(node.lp, "Softmax")
             + 16 * (not node.lp.loss_weight) + 4 + blob(_axes(node)) + _softmax(node) + 2 * POINTER + blob(1))
    if not node.lp.HasField("softmax_param"):
        total += message_size(node.lp.DESCRIPTOR.fields_by_name["softmax_param"].message_type)
    return total + (blob(4) if len(node.bottoms) < 3 else 0)


def _crop(node):
    """crop_layer.cpp:40-56: offsets, src_strides_, dest_strides_ (Blob<int>, one axis; their ints
    are buffers)."""
    return 3 * blob(1)


def _accuracy(node):
    """accuracy_layer.cpp:43: nums_buffer_ (one axis) with a per-class top."""
    return blob(1) if len(node.tops) > 1 else 0


def _dropout(node):
    """dropout_layer.cpp:27: rand_vec_, shaped like the bottom."""
    return blob(_axes(node))


def _lrn(node):
    """lrn_layer.cpp:18-63, 79: ACROSS_CHANNELS keeps scale_ (4 axes). WITHIN_CHANNEL builds five
    inner layers from fresh LayerParameters: Split (into product_input_ and square_input_), Power
    (square, into square_output_), AVE Pooling (into pool_output_), Power (into power_output_) and
    an Eltwise PROD (coeffs_ of 2); each Blob 4 axes, each inner layer's vectors of top pointers."""
    if node.lp.lrn_param.norm_region == 0:
        return blob(4)
    d = node.lp.DESCRIPTOR.fields_by_name
    power = message_size(d["power_param"].message_type)
    return (2 * POINTER + LAYER_BYTES["Split"] + SHARED_PTR_BLOCK + 2 * blob(4)
            + 2 * POINTER + LAYER_BYTES["Power"] + SHARED_PTR_BLOCK + power + blob(4)
            + POINTER + LAYER_BYTES["Pooling"] + SHARED_PTR_BLOCK + message_size(d["pooling_param"].message_type)
            + blob(4) + POINTER + LAYER_BYTES["Power"] + SHARED_PTR_BLOCK + power + blob(4)
            + 2 * POINTER + LAYER_BYTES["Eltwise"] + SHARED_PTR_BLOCK
            + message_size(d["eltwise_param"].message_type) + 2 * 4)


def _prelu(node):
    """prelu_layer.cpp:40-41, 56: multiplier_ and backward_buff_ (one axis); bottom_memory_ in place."""
    return 2 * blob(1) + (blob(_axes(node)) if node.in_place[0] else 0)


def _eltwise(node):
    """eltwise_layer.cpp:20, 42: coeffs_ (a float per bottom), max_idx_ (the top's axes) for MAX."""
    return 4 * len(node.bottoms) + (blob(len(node.top_shapes[0])) if node.lp.eltwise_param.operation == 2 else 0)


def _slice(node):
    """slice_layer.cpp:15-16, 72-73: slice_point_ pushed back; one top shares data and diff."""
    return 4 * grown(len(node.lp.slice_param.slice_point)) - (2 * SYNCED if len(node.tops) == 1 else 0)


def _concat(node):
    """concat_layer.cpp:51-52: a single bottom's data and diff are shared."""
    return -2 * SYNCED if len(node.bottoms) == 1 else 0


def _reshape(node):
    """reshape_layer.cpp:21-26, 89-90: copy_axes_ (the dims given as 0), pushed back; the top
    shares the bottom's data and diff."""
    zeros = sum(1 for d in node.lp.reshape_param.shape.dim if d == 0)
    return 4 * grown(zeros) - 2 * SYNCED


def _embed(node):
    """embed_layer.cpp:59: bias_multiplier_, one axis, with a bias."""
    return blob(1) if node.lp.embed_param.bias_term else 0


def _mvn(node):
    """mvn_layer.cpp:13-23: mean_, variance_, temp_, sum_multiplier_ (4 axes)."""
    return 4 * blob(4)


def _reduction(node):
    """reduction_layer.cpp:32: sum_multiplier_ (one axis) for SUM and MEAN."""
    return blob(1) if node.lp.reduction_param.operation in (1, 4) else 0


def _swish(node):
    """swish_layer.hpp:33-35, swish_layer.cpp:13-24: an inner Sigmoid layer from this
    LayerParameter, sigmoid_input_ and sigmoid_output_ (new Blobs, the bottom's axes), two vectors."""
    return (LAYER_BYTES["Sigmoid"] + SHARED_PTR_BLOCK + copy_bytes(node.lp) + 2 * new_blob(_axes(node))
            + 2 * POINTER)


def _im2col(node):
    """im2col_layer.cpp:20-91: kernel_shape_, stride_, pad_, dilation_ (Blob<int>, written)."""
    n = _axes(node) - node.lp.convolution_param.axis % _axes(node) - 1
    return 4 * (blob(1) + 4 * max(n, 1))


def _dummy_data(node):
    """dummy_data_layer.cpp:48-71: refill_, and fillers_ with a Filler per data_filler (one
    constant filler when none is given)."""
    fillers = list(node.lp.dummy_data_param.data_filler)
    if len(fillers) <= 1:
        made = [(fillers[0].type, copy_bytes(fillers[0])) if fillers else ("constant", STRING)]
    else:
        made = [(f.type, copy_bytes(f)) for f in fillers]
    return 8 + 16 * len(made) + sum(FILLER_BYTES.get(t, FILLER) + SHARED_PTR_BLOCK + b for t, b in made)


MEMBERS = {
    "Convolution": _conv, "Deconvolution": _conv, "InnerProduct": _inner_product, "Pooling": _pooling,
    "BatchNorm": _batch_norm, "Scale": _scale, "Bias": _bias, "Softmax": _softmax,
    "SoftmaxWithLoss": _softmax_with_loss, "SigmoidCrossEntropyLoss": _sigmoid_cross_entropy,
    "EuclideanLoss": _euclidean, "ContrastiveLoss": _contrastive, "InfogainLoss": _infogain,
    "HingeLoss": _loss, "MultinomialLogisticLoss": _loss, "Accuracy": _accuracy, "Dropout": _dropout,
    "LRN": _lrn, "PReLU": _prelu, "Eltwise": _eltwise, "Slice": _slice, "Concat": _concat, "Reshape": _reshape,
    "Crop": _crop,     "Embed": _embed, "MVN": _mvn, "Reduction": _reduction, "Swish": _swish, "Im2col": _im2col,
    "DummyData": _dummy_data,
}

# SyncedMemory objects a layer's first forward frees by sharing another blob's: each Split top takes
# the bottom's data (split_layer.cpp:29), Flatten's top too (flatten_layer.cpp:32), a second top of
# SoftmaxWithLoss or InfogainLoss takes prob_'s data, LRN's inner Split its two tops'.
FORWARD_SHARES = {
    "Split": lambda node: len(node.tops),
    "Flatten": lambda node: 1,
    "SoftmaxWithLoss": lambda node: len(node.tops) - 1,
    "InfogainLoss": lambda node: len(node.tops) - 1,
    "LRN": lambda node: 2 * (node.lp.lrn_param.norm_region == 1),
}
# and its first backward: Flatten's bottom takes the top's diff (flatten_layer.cpp:38)
BACKWARD_SHARES = {"Flatten": lambda node: 1}
