"""What TensorFlow runs for one call of each Keras layer in a training step (CPU kernels, graph mode).

One rule per layer family, registered under the Keras class names it serves (fvcore's plain table of
op handlers): `forward` makes the layer's output buffers from its inputs' and returns what the
gradients will read; `backward` makes the input gradients (where needed) and the weight gradients.
What a gradient reads is what TensorFlow's registered gradient (python/ops/*_grad.py) reads: MatMul's
both inputs, Conv2D's input (filter gradient) and filter, Relu its output, Relu6 and LeakyRelu their
input, Softmax/Sigmoid/Tanh their output, MaxPool its input and output, FusedBatchNorm its input,
Dropout's select its mask, BiasAdd and Add nothing. A tensor no gradient reads is freed after its
last forward reader. Classes without a rule are listed in the report (rule_for returns None).
"""
from math import prod

from ...errors import InputError
from ..layers.augmentation import AUGMENTATIONS
from ..layers.base import DTYPE_BYTES, nbytes
from ..layers.core import COMPARISONS
from . import kernels, optimizers

RULES = {}


def rule(*names):
    def deco(cls):
        for name in names:
            RULES[name] = cls()
        return cls
    return deco


def rule_for(class_name):
    return RULES.get(class_name)


def _size(spec):
    return nbytes(spec)


def _item(spec):
    return DTYPE_BYTES.get(spec.dtype, 4)


# activations: the op, whether it can write into its input, and what its gradient reads
# ("out": the activation's output, "in": its input, "both", None)
ACTIVATIONS = {
    "linear": None, None: None, "relu": ("out", True), "sigmoid": ("out", True), "tanh": ("out", True),
    "softmax": ("out", False), "elu": ("out", True), "selu": ("both", True), "softplus": ("in", True),
    "softsign": ("in", True), "relu6": ("out", True), "leaky_relu": ("in", True), "swish": ("in", False),
    "silu": ("in", False), "gelu": ("three", False), "hard_silu": ("three", False), "hard_swish": ("three", False),
    "exponential": ("out", True), "hard_sigmoid": ("in", False),
    "log_softmax": ("out", False), "mish": ("in", False),
}


def act_name(value):
    if isinstance(value, dict):
        value = value.get("config", {}).get("name") or value.get("class_name")
    return value.lower() if isinstance(value, str) else value


def act_forward(s, label, z, spec, activation, out_id=None):
    """The activation's op on buffer z: (output buffer, what its gradient keeps). GELU and hard SiLU
    are a few ops whose gradients keep three tensors of the input's size: tf.nn.gelu's exact
    `0.5 * x * erfc(-x / sqrt(2))` keeps 0.5 * x (written into x), the erfc and its argument (traced: a
    ViT's Dense(128, gelu), `Gelu/Neg`, `Gelu/mul_2` and the MatMul's output at the peak); Keras 3's
    hard_silu `x * (relu6(x + 3) / 6)` keeps x, x + 3 and the quotient (traced: MobileNetV3Small's
    `activation/add` and `activation/truediv` beside the batch norm's output). The softmax or sigmoid
    of a model output whose loss takes the logits under it is read by nothing unless a metric reads
    the output: Grappler prunes it (traced: a causal decoder's 768 x 2000 output, no Softmax op in the
    step, the logits alive at the loss)."""
    how = ACTIVATIONS.get(act_name(activation), ("both", False))
    if how is None or (out_id in s.unread_outputs and act_name(activation) in ("softmax", "sigmoid")):
        return z, None
    keeps, inplace = how
    if keeps == "three":
        u = s.one(f"{label} {act_name(activation)} inner", [z], _size(spec))
        v = s.one(f"{label} {act_name(activation)} factor", [u], _size(spec))
        y = s.one(f"{label} {act_name(activation)}", [z, v], _size(spec))
        return y, (z, u, v)
    y = s.one(f"{label} {act_name(activation)}", [z], _size(spec), forward=inplace)
    keep = {"out": (y,), "in": (z,), "both": (z, y)}[keeps]
    return y, keep


def act_backward(s, label, dy, spec, keep, out_id=None):
    """The activation's gradient: one op reading dy and what was kept. Where the loss took the logits
    (losses.py), the gradient already is the logits'."""
    if keep is None or (out_id is not None and out_id in s.logits):
        return dy
    scratch = _size(spec) if len(keep) == 3 else 0  # one more temporary of the input's size
    return s.one(f"{label} activation gradient", [dy, *keep], _size(spec), scratch=scratch, forward=True,
                 kind="gradient")


class Rule:
    """Pass-through: no op, no gradient op (InputLayer, Flatten, Reshape: a reshape shares memory)."""

    def forward(self, s, node, xs):
        return list(xs[:len(node.outputs)]) + [None] * (len(node.outputs) - len(xs)), None

    def grads_late(self, s, node):
        """Whether this call's weight gradients (and so their updates) are set aside: run after the
        input-gradient chain, or where it waits, not beside the layer's input gradient."""
        return False

    def backward(self, s, node, keep, dys, need):
        return [dys[0] if n else None for n in need], []


rule("Identity", "InputLayer", "Flatten", "Reshape", "Masking", "ActivityRegularization", "AlphaDropout",
     "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation", "RandomContrast", "RandomCrop")(Rule)


class _Weighted(Rule):
    """A layer with variables: weight gradients for the trainable ones, in the layer's order."""

    def grads(self, s, node, label, reads, scratch=0, only=None):
        out = []
        for w in s.weights_of(node):
            if not w.trainable or (only is not None and w.name not in only):
                continue
            g = s.one(f"{label} {w.name} gradient", reads, nbytes(w), scratch=scratch if not out else 0,
                      kind="weight gradient")
            out.append((w, g))
        return out


def at_high_end(s):
    """Whether the step is laid out at the high end of what the executor's order can hold (build_step's
    "late" order), which marks the step's order as guessed so that that layout is made."""
    s.order_guessed = True
    return s.weight_order == "late"


def weights_aside(s, guess):
    """Whether a Dense layer's or a convolution's weight gradients are set aside (their grads_late): the
    rules' guess from the traces, or, where build_step lays out the executor's other orders, the one it
    asks for (the age and gender CNN's two heads, traced in tf_keras, ran its Dense kernel gradient and
    its convolutions' filter gradients before their input gradients, against the guess)."""
    s.order_guessed = True
    return guess if s.weight_order is None else s.weight_order == "late"


# the layers whose weight-gradient order tf_keras's executor gives by their rank (leads_chain)
RANKED = frozenset({"Dense", "Conv1D", "Conv2D", "Conv3D", "Convolution1D", "Convolution2D", "Convolution3D"})


def leads_chain(s, node):
    """Whether tf_keras's executor runs this Dense layer's or convolution's weight gradients in the chain,
    where the optimizer's updates have ops that read no gradient (SGD, RMSprop) and no branches join nor
    a loss reads a spatial output: the first two of the layers that hand a gradient on (program's
    `handing_on`) do, the later ones and the output layer set theirs aside. None where this does not
    apply. Traced with the executor's log of the ops it runs (the real users' files of
    tests/data/keras_oracle/real*, in tf_keras): a VGG-like CNN's 14 such layers, its first two in the
    chain and the other twelve aside; 612 of the 672 layers of the 172 such configurations so, 122 of
    them in every layer (most others recurrent models, whose Dense layer on the loop's output runs in
    the chain, which moves no peak, or CNNs with a third layer in the chain). A guess, which build_step's
    other orders bound: why the cut falls there is not derived. The executor runs the last of the ops a
    gradient makes ready at once and the others after, last first; their order is the graph's after
    Grappler's rewrites."""
    rank = s.handing_on.get(id(node))
    if s.flavour != "tf_keras" or s.joins or s.spatial_loss or rank is None:
        return None
    if optimizers.reads_no_gradient(s.flavour, s.optimizer) is None:
        return None
    return not _makes_an_output(s, node) and rank < 2


def _makes_an_output(s, node):
    """Whether the call makes one of the model's outputs, which a loss reads."""
    return any(t is o for t in node.outputs for o in s.graph.outputs)


@rule("Dense", "EinsumDense")
class Dense(_Weighted):
    """MatMul (a Tensordot's reshapes share memory), BiasAdd into it, the activation. Its weight
    gradients run after the input-gradient chain (traced: tf_keras's small CNN, VGG16 and a CNN like
    seed 002's; Keras 3's small CNN), so its input and output gradient live until then, but in
    tf_keras with SGD or RMSprop by its rank (leads_chain). Keras 3's output
    layer, the one the loss reads, runs its kernel gradient first (traced: a tanh MLP with SGD, each of its
    Dense layers' MatMul_1 before its MatMul; a user's Bidirectional LSTM with a 6,120-way Dense, whose 7.3 MB
    kernel gradient and its update ran before the LSTM's gradient loop; on the oracle's sets 10 Keras 3
    configurations came within 10% so and 4 MLPs went out: a guess, which build_step's other orders bound)."""

    def grads_late(self, s, node):
        lead = leads_chain(s, node)
        if lead is not None:
            return weights_aside(s, not lead)
        return weights_aside(s, not (s.flavour == "keras3" and _makes_an_output(s, node)))

    @staticmethod
    def updates_in_chain(s, node):
        """Whether the weights' updates run as soon as their gradients are made, before the layer's input
        gradient, where the chain runs them (traced: Keras 3's tanh MLP, each Dense's bias and kernel update
        right after its gradient; a user's 6,120-way Dense, its kernel's Mul and AssignSub before its input
        gradient's MatMul; in tf_keras a user's CNN, BiasAddGrad and its update's Neg, Mul, AddV2 and assigns,
        then MatMul_1 and its update's, then the input gradient's MatMul, its convolutions likewise): not for
        a layer called more than once or a regularized one, whose gradients are added up first
        (program._summed, _penalized)."""
        return not s.shared_layers.get(id(node.layer)) and not any(
            node.layer.config.get(f"{w}_regularizer") for w in ("kernel", "bias"))

    def dims(self, node):
        """(rows, input features, units) of the layer's MatMul, the leading axes taken as rows."""
        x, y = node.inputs[0].spec, node.outputs[0].spec
        return prod(x.shape[:-1]), x.shape[-1], y.shape[-1]

    def matmul_scratch(self, s, node, rows, inner, cols, transposed=False):
        """MatMul's packed blocks and sgemm's workspace on the CPU (kernels.contraction); EinsumDense's
        Einsum is not counted.
        The gradients multiply with an operand transposed (math_grad.py _MatMulGrad: dz by the
        kernel's transpose, the input's transpose by dz)."""
        if s.device != "cpu" or node.layer.class_name != "Dense":
            return 0
        return kernels.contraction(rows, inner, cols, _item(node.outputs[0].spec), transposed)

    def forward(self, s, node, xs):
        out = node.outputs[0].spec
        z = s.one(f"{node.layer.name} MatMul", [xs[0]], _size(out),
                  scratch=self.matmul_scratch(s, node, *self.dims(node)))
        if node.layer.config.get("use_bias", True) and node.layer.class_name == "Dense":
            z = s.one(f"{node.layer.name} BiasAdd", [z], _size(out), forward=True)
        y, act = act_forward(s, node.layer.name, z, out, node.layer.config.get("activation"), id(node.outputs[0]))
        return [y], (xs[0], act, y)

    def backward(self, s, node, keep, dys, need):
        x, act, y = keep
        name = node.layer.name
        dz = act_backward(s, name, dys[0], node.outputs[0].spec, act, id(node.outputs[0]))
        ws = [w for w in s.weights_of(node) if w.trainable]
        rows, inner, units = self.dims(node)
        grads = []
        for w in ws:
            reads = [dz] if w.name == "bias" else [x, dz]
            scratch = self.matmul_scratch(s, node, inner, rows, units, transposed=True) if w.name == "kernel" else 0
            grads.append((w, s.one(f"{name} {w.name} gradient", reads, nbytes(w), scratch=scratch,
                                   kind="weight gradient")))
        if not self.grads_late(s, node) and self.updates_in_chain(s, node):
            s.update_now(node, grads, read_later=need[0], chain=True)
        dx = None
        if need[0]:
            dx = s.one(f"{name} input gradient", [dz], _size(node.inputs[0].spec),
                       scratch=self.matmul_scratch(s, node, rows, units, inner, transposed=True), kind="gradient")
        s.one(f"{name} gradient done", [dz, x], 0)
        return [dx], grads


def _taps(node, spatial_axes):
    """The kernel's taps: the product of `kernel_size`, one size standing for every spatial axis."""
    kernel = node.layer.config.get("kernel_size") or [1]
    return prod(kernel) if isinstance(kernel, (list, tuple)) else kernel ** spatial_axes


def _groups(node):
    """A convolution's `groups` (1 where the config gives none)."""
    return int(node.layer.config.get("groups", 1) or 1)


def _conv2d_kernel(s, kernel, dims, item, weight_bytes=0):
    """What one of TensorFlow's CPU Conv2D kernels holds besides its output (kernels.py), for a
    contraction of `dims` = (batch, output pixels, taps x input channels, filters): Conv2D packs
    MatMul's blocks; Conv2DBackpropFilter holds im2col's buffer and the contraction's temporary of
    the filter's `weight_bytes`; Conv2DBackpropInput holds im2col's buffer; each takes sgemm's
    workspace. 0 off the CPU."""
    if s.device != "cpu":
        return 0
    batch, pixels, filter_total, depth = dims
    if kernel == "Conv2D":
        return kernels.contraction(batch * pixels, filter_total, depth, item)
    workspace = kernels.gemm_workspace(item)
    if kernel == "Conv2DBackpropFilter":
        return (kernels.conv_backprop_filter(pixels, filter_total, depth, item)
                + kernels.contraction_temporary(weight_bytes) + workspace)
    return kernels.conv_backprop_input(batch, pixels, filter_total, depth, item, s.threads) + workspace


def _conv_dims(node, swapped=False):
    """(batch, output pixels, kernel taps x input channels, output channels) of a convolution's
    contraction; `swapped`: of a transposed convolution's kernels, whose roles of input and output
    are a convolution's the other way round (x's pixels, taps x the layer's output channels, x's
    channels)."""
    x, y = node.inputs[0].spec, node.outputs[0].spec
    if swapped:
        x, y = y, x
    last = node.layer.config.get("data_format", "channels_last") != "channels_first"
    cin, cout = (x.shape[-1], y.shape[-1]) if last else (x.shape[1], y.shape[1])
    spatial = y.shape[1:-1] if last else y.shape[2:]
    return x.shape[0], prod(spatial), _taps(node, len(spatial)) * cin, cout


@rule("Conv1D", "Conv2D", "Conv3D", "Convolution1D", "Convolution2D", "Convolution3D")
class Conv(_Weighted):
    """Conv2D (Conv1D through ExpandDims, which shares memory), BiasAdd into it, the activation; the
    gradients are Conv2DBackpropFilter (reads the input) and Conv2DBackpropInput (reads the filter),
    each with its im2col scratch (kernels.py). The filter gradient is set aside by the executor
    (program._Executor) in tf_keras (traced: small CNN, VGG16, ResNet50, a U-Net) where the optimizer
    has no update op that reads no gradient (Adam...); with SGD or RMSprop, by its rank where no branches
    join (leads_chain), and where they do unless the model has a Dropout (traced: the Keras 2 CIFAR-10
    CNN, the image classification tutorial). In tf_keras a filter gradient run in the chain has its
    update run at once, before the input gradient (Dense.updates_in_chain). In Keras 3 it is set aside
    where the model's branches join (traced: ResNet50, MobileNetV2 and V3, a CIFAR ResNet, a U-Net),
    a Conv1D's aside (traced: the text CNN) unless it is dilated (traced: a TCN, whose dilated
    Conv1Ds' filter gradients wait and its undilated ones' do not), and after the model's first Dropout
    (traced: an emotion CNN, the Keras 2 CIFAR-10 CNN, an MNIST CNN, whose convolutions before it ran
    theirs in the chain) unless the optimizer is plain SGD (traced: two users' emotion CNNs and an SVHN
    CNN, every convolution's in the chain), and in both where a loss is on a spatial output (an
    autoencoder's or a segmentation net's: of the 72 such configurations measured here, 69 are within
    10% so and the other three in neither order; Keras 3's dilated segmentation CNN and a
    transposed-convolution segmentation net are only so); otherwise it runs before the layer's input
    gradient (traced: Keras 3's small CNN). Which of two ready ops the executor sets aside is not
    derived here: this is what the traces and measurements show."""

    def grads_late(self, s, node):
        if self.through_xla(s, node):
            return False
        lead = leads_chain(s, node)
        if lead is not None:
            return weights_aside(s, not lead)
        no_early_op = optimizers.reads_no_gradient(s.flavour, s.optimizer) is None
        in_chain = not no_early_op and (s.dropout or not s.joins)
        plain_sgd = no_early_op and s.optimizer is not None and s.optimizer[0] == "SGD" and not s.joins
        conv2d = len(node.inputs[0].spec.shape) != 3 or self.reshaped(node)[1] is not None
        return weights_aside(s, (s.flavour == "tf_keras" and not in_chain) or (s.joins and conv2d) or s.spatial_loss
                            or (s.flavour == "keras3" and id(node) in s.after_dropout and not plain_sgd))

    @staticmethod
    def through_xla(s, node):
        """A grouped convolution on the CPU: both Kerases compile it with XLA (TensorFlow's CPU kernels
        have no groups), forward and gradient each one XLA call (xla_buffer)."""
        return s.device == "cpu" and _groups(node) > 1

    def xla_buffer(self, node):
        """The buffer of a grouped convolution's XLA gradient call. One channel per group (ConvNeXt's
        7 x 7 depthwise Conv2D; traced on ConvNeXtTiny, both flavours, batch 2): the kernel expanded
        to a dense one and a dense filter gradient, 2 x taps x C_in x C_out floats (stage 3's
        7 x 7 x 768 x 768: 231,211,008 bytes; stages 2 and 1 likewise; the 56 x 56 stage 0 holds
        less, 2.4 MB where this counts 3.6 MB). Several channels per group (RegNetX002's groups of 8,
        traced in tf_keras at batch 4): activation-sized buffers, twice the input's at the first stage."""
        _, _, filter_total, out_depth = self.dims(node)
        x = node.inputs[0].spec
        if _groups(node) * _taps(node, len(x.shape) - 2) == filter_total:  # a group per input channel
            return 2 * filter_total * out_depth * _item(node.outputs[0].spec)
        return 2 * _size(x)

    def forward(self, s, node, xs):
        out = node.outputs[0].spec
        name = node.layer.name
        scratch = 0
        if self.through_xla(s, node):
            scratch = _size(out)
        elif s.device == "cpu":
            # Eigen's spatial convolution is a contraction of the image patches with the filter:
            # MatMul's packing buffer, for (batch x output pixels) by (filter) by (output channels)
            batch, out_image, filter_total, out_depth = self.dims(node)
            scratch = (kernels.cuboid_forward(batch * out_image, filter_total, out_depth, _item(out))
                       if self.cuboid(node) else _conv2d_kernel(s, "Conv2D", self.dims(node), _item(out)))
        x = xs[0]
        padded, blocks = self.reshaped(node)
        if padded is not None:
            x = s.one(f"{name} Pad", [x], padded)
        if blocks is not None:
            x = s.one(f"{name} SpaceToBatchND", [x], blocks[0])
            z = s.one(f"{name} Conv", [x], blocks[1], scratch=scratch)
            z = s.one(f"{name} BatchToSpaceND", [z], _size(out))
        else:
            z = s.one(f"{name} Conv", [x], _size(out), scratch=scratch)
        if node.layer.config.get("use_bias", True):
            z = s.one(f"{name} BiasAdd", [z], _size(out), forward=True)
        y, act = act_forward(s, name, z, out, node.layer.config.get("activation"), id(node.outputs[0]))
        return [y], (x, act)

    def reshaped(self, node):
        """What a causal or dilated convolution runs around its Conv2D (traced: a TCN of causal
        Conv1Ds dilated 1 to 8, both flavours). Causal padding is a Pad of the input by (k - 1) x d at
        the start (its gradient a Slice); a dilation over 1 goes through SpaceToBatchND (the padded
        input cut into d interleaved sequences, each rounded up to a multiple of d, batch x d of
        them), a VALID Conv2D over them and BatchToSpaceND back (nn_ops.py, with_space_to_batch),
        whose gradients run the other way. Returns (the padded input's bytes or None, (the blocks'
        bytes, the Conv2D's output bytes, its images, its output pixels) or None)."""
        config = node.layer.config
        x = node.inputs[0].spec
        rank = len(x.shape) - 2
        if config.get("data_format", "channels_last") == "channels_first" or self.cuboid(node):
            return None, None
        dilation = config.get("dilation_rate") or 1
        dilation = list(dilation) if isinstance(dilation, (list, tuple)) else [dilation] * rank
        kernel = config.get("kernel_size") or 1
        kernel = list(kernel) if isinstance(kernel, (list, tuple)) else [kernel] * rank
        padding = config.get("padding", "valid")
        item, batch, channels = _item(x), x.shape[0], x.shape[-1]
        sizes = [n + (k - 1) * d if padding in ("same", "causal") else n
                 for n, k, d in zip(x.shape[1:-1], kernel, dilation)]
        padded = batch * prod(sizes) * channels * item if padding == "causal" else None
        if all(d == 1 for d in dilation):
            return padded, None
        blocks = [-(-n // d) for n, d in zip(sizes, dilation)]
        out = [b - k + 1 for b, k in zip(blocks, kernel)]
        filters = node.outputs[0].spec.shape[-1]
        return padded, (batch * prod(dilation) * prod(blocks) * channels * item,
                        batch * prod(dilation) * prod(out) * filters * item, batch * prod(dilation), prod(out))

    @staticmethod
    def cuboid(node):
        """A Conv3D: Eigen's cuboid convolutions, whose buffers kernels.cuboid_* give."""
        return node.layer.class_name in ("Conv3D", "Convolution3D")

    def filter_scratch(self, s, node, w):
        """What the filter gradient holds besides itself on the CPU (kernels.py)."""
        if s.device != "cpu":
            return 0
        batch, out_image, filter_total, out_depth = self.dims(node)
        item = _item(node.outputs[0].spec)
        if self.cuboid(node):
            return kernels.cuboid_backprop_filter(batch, out_image, filter_total, out_depth, self.elements(node), item)
        return _conv2d_kernel(s, "Conv2DBackpropFilter", self.dims(node), item, nbytes(w))

    def input_scratch(self, s, node):
        """What the input gradient holds besides itself on the CPU (kernels.py)."""
        if s.device != "cpu":
            return 0
        batch, out_image, filter_total, out_depth = self.dims(node)
        item = _item(node.outputs[0].spec)
        if self.cuboid(node):
            in_depth = filter_total // _taps(node, len(node.inputs[0].spec.shape) - 2)
            return kernels.cuboid_backprop_input(batch, out_image, filter_total, out_depth, in_depth,
                                                 self.elements(node), item)
        return _conv2d_kernel(s, "Conv2DBackpropInput", self.dims(node), item)

    def elements(self, node):
        """Elements of the input, the filter and the output (gradient), as the 3-D kernels weigh them."""
        batch, out_image, filter_total, out_depth = self.dims(node)
        return prod(node.inputs[0].spec.shape), filter_total * out_depth, batch * out_image * out_depth

    def dims(self, node):
        """The contraction's (images, pixels, taps x channels, filters): a dilated convolution's Conv2D
        runs on SpaceToBatchND's blocks, batch x dilation images of the blocks' output pixels
        (traced: Conv2DBackpropInput's im2col buffer of 831 images of 50 pixels for a Conv1D dilated 8
        on 400 steps, where the undilated sizes give 145 of 400)."""
        batch, pixels, taps, filters = _conv_dims(node)
        blocks = self.reshaped(node)[1]
        return (blocks[2], blocks[3], taps, filters) if blocks is not None else (batch, pixels, taps, filters)

    def backward(self, s, node, keep, dys, need):
        x, act = keep
        name = node.layer.name
        dz = act_backward(s, name, dys[0], node.outputs[0].spec, act, id(node.outputs[0]))
        if self.through_xla(s, node):
            return self.xla_backward(s, node, x, dz, need)
        grads = []
        padded, blocks = self.reshaped(node)
        dzb = dz
        if blocks is not None:
            dzb = s.one(f"{name} SpaceToBatchND gradient", [dz], blocks[1], kind="gradient")
        for w in s.weights_of(node):
            if not w.trainable:
                continue
            if w.name == "bias":
                grads.append((w, s.one(f"{name} bias gradient", [dz], nbytes(w), kind="weight gradient")))
            else:
                grads.append((w, s.one(f"{name} Conv2DBackpropFilter", [x, dzb], nbytes(w),
                                       scratch=self.filter_scratch(s, node, w), kind="weight gradient")))
        if s.flavour == "tf_keras" and not self.grads_late(s, node) and Dense.updates_in_chain(s, node):
            s.update_now(node, grads, read_later=need[0])
        dx = None
        if need[0]:
            if blocks is not None:
                dx = s.one(f"{name} Conv2DBackpropInput", [dzb], blocks[0], scratch=self.input_scratch(s, node),
                           kind="gradient")
                dx = s.one(f"{name} BatchToSpaceND gradient", [dx], padded or _size(node.inputs[0].spec),
                           kind="gradient")
            else:
                dx = s.one(f"{name} Conv2DBackpropInput", [dzb], padded or _size(node.inputs[0].spec),
                           scratch=self.input_scratch(s, node), kind="gradient")
            if padded is not None:
                dx = s.one(f"{name} Pad gradient (Slice)", [dx], _size(node.inputs[0].spec), kind="gradient")
        s.one(f"{name} gradient done", [dz, dzb], 0)
        return [dx], grads

    def xla_backward(self, s, node, x, dz, need):
        """A grouped convolution's gradient: BiasAddGrad, then one XLA call making the filter's and
        the input's gradients (through_xla)."""
        name = node.layer.name
        ws = [w for w in s.weights_of(node) if w.trainable]
        grads = [(w, s.one(f"{name} bias gradient", [dz], nbytes(w), kind="weight gradient"))
                 for w in ws if w.name == "bias"]
        kernel = [w for w in ws if w.name != "bias"]
        makes = [(nbytes(w), "weight gradient") for w in kernel]
        if need[0]:
            makes.append((_size(node.inputs[0].spec), "gradient"))
        made = s.op(f"{name} gradient (XLA)", [x, dz], makes, scratch=self.xla_buffer(node))
        grads += list(zip(kernel, made))
        return [made[-1] if need[0] else None], grads


@rule("DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D", "SeparableConvolution1D",
      "SeparableConvolution2D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose", "Convolution1DTranspose",
      "Convolution2DTranspose", "Convolution3DTranspose", "Deconvolution2D")
class OtherConv(_Weighted):
    """Depthwise (DepthwiseConv2dNative: small per-row scratch), separable (a depthwise then a
    pointwise Conv2D: the intermediate is kept for the pointwise filter gradient) and transposed
    convolutions (Conv2DBackpropInput forward). Their filter gradients are set aside as Conv's
    (traced: MobileNetV2's depthwise, a U-Net's transposed, Keras 3's Xception's separable ones),
    except a separable one's in tf_keras, which runs in the chain (its Xception: -2.9% so, +11.9%
    set aside; not traced), and in tf_keras a 2-D or 3-D transposed one's where no branches join,
    which runs before its input gradient (traced: an autoencoder with a dense bottleneck, +24.4% to
    -6.8% so; the Conv3DTranspose autoencoder +32.6% to -0.3%; a U-Net's wait, as above)."""

    def grads_late(self, s, node):
        if s.flavour == "keras3" or node.layer.class_name in (
                "Conv2DTranspose", "Conv3DTranspose", "Convolution2DTranspose", "Convolution3DTranspose",
                "Deconvolution2D"):
            return weights_aside(s, s.joins)
        return weights_aside(s, not node.layer.class_name.startswith("Separable"))

    def forward(self, s, node, xs):
        out = node.outputs[0].spec
        name = node.layer.name
        mid = None
        if node.layer.class_name.startswith("Separable"):
            x = node.inputs[0].spec
            mult = int(node.layer.config.get("depth_multiplier", 1) or 1)
            mid_bytes = _size(out) // max(out.shape[-1], 1) * x.shape[-1] * mult
            mid = s.one(f"{name} depthwise", [xs[0]], mid_bytes)
            z = s.one(f"{name} pointwise", [mid], _size(out), scratch=self.pointwise_scratch(s, node, "forward"))
        else:
            z = s.one(f"{name} conv", [xs[0]], _size(out), scratch=self.transposed_scratch(s, node, "forward"))
        if node.layer.config.get("use_bias", True):
            z = s.one(f"{name} BiasAdd", [z], _size(out), forward=True)
        y, act = act_forward(s, name, z, out, node.layer.config.get("activation"), id(node.outputs[0]))
        return [y], (xs[0], mid, act)

    def transposed_scratch(self, s, node, op):
        """A transposed convolution's kernels on the CPU, the roles of a convolution's swapped: its
        forward pass is Conv2DBackpropInput and its filter gradient Conv2DBackpropFilter of (the output
        gradient, x), each with its im2col buffer over x's pixels by (kernel x output channels)
        (traced: Keras's Conv1D autoencoder, 207 x 144 x 224 floats; a Conv2DTranspose autoencoder,
        90 x 196 x 288 and 116 x 49 x 576), its input gradient a Conv2D (MatMul's packed blocks over
        x's pixels). 0 for any other convolution here, or off the CPU."""
        if s.device != "cpu" or "Transpose" not in node.layer.class_name and node.layer.class_name != "Deconvolution2D":
            return 0
        w = next(w for w in s.weights_of(node) if w.name == "kernel")
        dims, item = _conv_dims(node, swapped=True), _item(node.outputs[0].spec)
        if node.layer.class_name in ("Conv3DTranspose", "Convolution3DTranspose"):
            return self.cuboid_scratch(node, op, dims, item)
        kernel = {"forward": "Conv2DBackpropInput", "filter": "Conv2DBackpropFilter", "input": "Conv2D"}[op]
        return _conv2d_kernel(s, kernel, dims, item, nbytes(w))

    @staticmethod
    def cuboid_scratch(node, op, dims, item):
        """A Conv3DTranspose's kernels are Conv3D's own (Conv.cuboid), their roles swapped: its forward
        pass is Conv3DBackpropInputV2, its filter gradient Conv3DBackpropFilterV2 and its input
        gradient a Conv3D, over the convolution whose input is this layer's output."""
        batch, pixels, filter_total, depth = dims
        y, x = node.outputs[0].spec, node.inputs[0].spec
        elements = (prod(y.shape), filter_total * depth, prod(x.shape))
        if op == "forward":
            return kernels.cuboid_backprop_input(batch, pixels, filter_total, depth, y.shape[-1], elements, item)
        if op == "filter":
            return kernels.cuboid_backprop_filter(batch, pixels, filter_total, depth, elements, item)
        return kernels.cuboid_forward(batch * pixels, filter_total, depth, item)

    def pointwise_scratch(self, s, node, op):
        """A separable convolution's pointwise 1 x 1 Conv2D on the CPU: its forward pass packs MatMul's
        blocks, its gradients hold Conv2D's im2col buffers over the output's pixels by the depthwise
        channels (traced: tf_keras's SeparableConv2D CNN at batch 16, a 138 x 256 x 64-float buffer of
        the second one's filter gradient at the step's peak)."""
        x, out = node.inputs[0].spec, node.outputs[0].spec
        channels = x.shape[-1] * int(node.layer.config.get("depth_multiplier", 1) or 1)
        kernel = {"forward": "Conv2D", "filter": "Conv2DBackpropFilter", "input": "Conv2DBackpropInput"}[op]
        w = next(w for w in s.weights_of(node) if w.name == "pointwise_kernel")
        return _conv2d_kernel(s, kernel, (out.shape[0], prod(out.shape[1:-1]), channels, out.shape[-1]), _item(out),
                              nbytes(w))

    def backward(self, s, node, keep, dys, need):
        x, mid, act = keep
        name = node.layer.name
        dz = act_backward(s, name, dys[0], node.outputs[0].spec, act, id(node.outputs[0]))
        grads = []
        dmid = None
        if mid is not None:
            dmid = s.one(f"{name} pointwise input gradient", [dz], 0 if mid is None else s.prog.bufs[mid].bytes,
                         scratch=self.pointwise_scratch(s, node, "input"), kind="gradient")
        for w in s.weights_of(node):
            if not w.trainable:
                continue
            reads = [dz] if w.name == "bias" else [mid, dz] if w.name == "pointwise_kernel" else [x, dmid or dz]
            scratch = (self.transposed_scratch(s, node, "filter") if w.name == "kernel" else
                       self.pointwise_scratch(s, node, "filter") if w.name == "pointwise_kernel" else 0)
            grads.append((w, s.one(f"{name} {w.name} gradient", reads, nbytes(w), scratch=scratch,
                                   kind="weight gradient")))
        dx = None
        if need[0]:
            dx = s.one(f"{name} input gradient", [dmid or dz], _size(node.inputs[0].spec),
                       scratch=self.transposed_scratch(s, node, "input"), kind="gradient")
        s.one(f"{name} gradient done", [dz, x, dmid], 0)
        return [dx], grads


@rule("BatchNormalization", "SyncBatchNormalization", "LayerNormalization", "GroupNormalization",
      "UnitNormalization")
class Norm(_Weighted):
    """FusedBatchNormV3 (tf_keras for 4-D inputs; LayerNormalization through it too): the output is new,
    the gradient reads the input. Unfused (moments, then x * inv + shift): the same, plus the
    squared differences and the gradient's element-wise temporaries. In an unfused
    LayerNormalization the statistics are per sample, so inv = gamma * rsqrt(variance) has the
    input's shape, and Mul's gradient keeps it for the input gradient (traced: tf_keras
    transformer block, `layer_normalization/batchnorm/mul` alive at the peak)."""

    @staticmethod
    def fused(s, node):
        """Whether the layer runs as FusedBatchNormV3: a batch norm of a 4-D input; a LayerNormalization
        in tf_keras over the trailing axes, whatever the rank, with an epsilon of at least 1.001e-5 and
        float32 variables (layer_normalization.py, _fused_can_be_used: fused_batch_norm would raise a
        smaller epsilon); Keras 3's ops.layer_normalization computes the moments on the TensorFlow
        backend whatever the rank (ops/nn.py, _layer_normalization)."""
        if node.layer.class_name != "LayerNormalization":
            return len(node.outputs[0].spec.shape) == 4
        if s.flavour != "tf_keras" or float(node.layer.config.get("epsilon", 1e-3)) < 1.001e-5:
            return False
        rank = len(node.outputs[0].spec.shape)
        axes = node.layer.config.get("axis", -1)
        axes = sorted(a % rank for a in (axes if isinstance(axes, list) else [axes]))
        return axes[-1] == rank - 1 and axes[-1] - axes[0] == len(axes) - 1

    def forward(self, s, node, xs):
        out = node.outputs[0].spec
        fused = self.fused(s, node)
        name = node.layer.name
        inv = None
        if fused and node.layer.class_name == "LayerNormalization":
            return self.fused_layer_norm(s, node, xs[0])
        if not fused:
            sq = s.one(f"{name} squared difference", [xs[0]], _size(out))
            s.one(f"{name} variance", [sq], 0)
            if node.layer.class_name == "LayerNormalization":
                inv = s.one(f"{name} gamma*rsqrt(variance)", [], _size(out))
        y = s.one(f"{name} normalize", [xs[0], inv], _size(out))
        return [y], (xs[0], fused, inv)

    def fused_layer_norm(self, s, node, x):
        """tf_keras's fused LayerNormalization (layer_normalization.py, call): the input reshaped to
        (1, rows, features, 1) and normalized by FusedBatchNormV3 as NCHW, whose CPU kernel works in
        NHWC: it transposes the input and its result (two input-sized temporaries) and writes the
        output back (traced: tf_keras's LayerNorm GELU MLP); then outputs * gamma, a new tensor, and
        + beta into it. Mul's gradient keeps the normalized output."""
        name, size = node.layer.name, _size(node.outputs[0].spec)
        y = s.one(f"{name} fused batch norm", [x], size, scratch=2 * size)
        scaled = s.one(f"{name} * gamma", [y], size)
        return [s.one(f"{name} + beta", [scaled], size, forward=True)], (x, "layer", y)

    def grads_late(self, s, node):
        # LayerNormalization's gamma and beta gradients are Mul and Sum ops of their own (a batch
        # norm's FusedBatchNormGradV3 makes them with the input gradient): they run after the chain
        # (traced: tf_keras transformer block), keeping the layer's input and output gradient
        return node.layer.class_name == "LayerNormalization"

    def backward(self, s, node, keep, dys, need):
        if keep[1] == "layer":
            return self.fused_layer_norm_backward(s, node, keep, dys, need)
        x, fused, inv = keep
        name = node.layer.name
        size = _size(node.inputs[0].spec)
        # unfused: gamma's gradient sums dy * x, an input-sized temporary (traced: a Huber regression MLP)
        scratch = 0 if fused else size
        grads = self.grads(s, node, name, [x, dys[0]], scratch=scratch)
        dx = s.one(f"{name} input gradient", [dys[0], x, inv], size, kind="gradient") if need[0] else None
        s.one(f"{name} gradient done", [x, dys[0], inv], 0)
        return [dx], grads

    def fused_layer_norm_backward(self, s, node, keep, dys, need):
        """beta's gradient sums dy; gamma's sums dy * the normalized output (an input-sized temporary);
        the input's is FusedBatchNormGradV3 of dy * gamma, whose CPU kernel transposes the input and
        dy * gamma to NHWC and computes there before writing the input gradient back: three
        input-sized temporaries (traced: three NHWC blocks and the NCHW result alive at the peak)."""
        x, _, y = keep
        name, size = node.layer.name, _size(node.inputs[0].spec)
        grads = self.grads(s, node, name, [dys[0], y], scratch=size)
        dx = None
        if need[0]:
            dy_scaled = s.one(f"{name} dy * gamma", [dys[0]], size, kind="gradient")
            dx = s.one(f"{name} input gradient", [dy_scaled, x], size, scratch=3 * size, kind="gradient")
        s.one(f"{name} gradient done", [x, y, dys[0]], 0)
        return [dx], grads


@rule("RMSNormalization")
class RMSNorm(_Weighted):
    """Keras 3's ops.rms_normalization: x * rsqrt(mean(square(x)) + epsilon), then * scale. Square's
    and the first Mul's gradients read x, the second Mul's reads its input t (for the scale's
    gradient, a temporary t * dy summed down); the mean's gradient is broadcast back to x's shape
    (math_grad.py _SquareGrad, _MulGrad, _MeanGrad)."""

    def forward(self, s, node, xs):
        name, size = node.layer.name, _size(node.outputs[0].spec)
        squared = s.one(f"{name} square(x)", [xs[0]], size)
        s.one(f"{name} mean", [squared], 0)
        t = s.one(f"{name} x*rsqrt", [xs[0]], size)
        return [s.one(f"{name} *scale", [t], size)], (xs[0], t)

    def backward(self, s, node, keep, dys, need):
        x, t = keep
        name, size = node.layer.name, _size(node.inputs[0].spec)
        grads = self.grads(s, node, name, [dys[0], t], scratch=size)
        dt = s.one(f"{name} dy*scale", [dys[0]], size, forward=True, kind="gradient")
        s.one(f"{name} rsqrt gradient", [dt, x], 0, scratch=size)
        direct = s.one(f"{name} dt*rsqrt", [dt], size, forward=True, kind="gradient")
        spread = s.one(f"{name} mean gradient", [], size, kind="gradient")
        through = s.one(f"{name} square gradient", [spread, x], size, forward=True, kind="gradient")
        dx = s.one(f"{name} input gradient", [direct, through], size, forward=True, kind="gradient")
        return [dx if need[0] else None], grads


@rule("Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "ThresholdedReLU", "PReLU")
class Act(_Weighted):
    def kind(self, node):
        c = node.layer.config
        if node.layer.class_name == "Activation":
            return c.get("activation")
        if node.layer.class_name == "ReLU":
            if c.get("max_value") is not None or c.get("negative_slope") or c.get("threshold"):
                return "relu6"
            return "relu"
        return {"LeakyReLU": "leaky_relu", "ELU": "elu", "Softmax": "softmax", "ThresholdedReLU": "relu6",
                "PReLU": "selu"}[node.layer.class_name]

    def forward(self, s, node, xs):
        y, keep = act_forward(s, node.layer.name, xs[0], node.outputs[0].spec, self.kind(node), id(node.outputs[0]))
        return [y], keep

    def grads_late(self, s, node):
        return node.layer.class_name == "PReLU" and s.flavour == "keras3"

    def backward(self, s, node, keep, dys, need):
        # PReLU's alpha gradient multiplies dy by relu(-x), the input's size, then sums over the axes
        # alpha is shared on, before the input's gradient is made
        product = _size(node.outputs[0].spec) if node.layer.class_name == "PReLU" else 0
        grads = self.grads(s, node, node.layer.name, [dys[0], *(keep or ())], scratch=product)
        dx = act_backward(s, node.layer.name, dys[0], node.outputs[0].spec, keep,
                          id(node.outputs[0]) if node.layer.class_name in ("Activation", "Softmax") else None)
        return [dx if need[0] else None], grads


# tf_keras's TFOpLambda (a public TensorFlow function in a Functional model: `x + 3.0` is
# "__operators__.add"): what each elementwise function's registered gradient reads (math_grad.py,
# nn_grad.py): nothing (add, subtract, negate: the gradient is dy itself where the shapes agree),
# its input, its output, or both. Multiply and divide read their tensor operands (a constant factor:
# nothing).
TF_FUNCTION_READS = {
    "__operators__.add": None, "math.add": None, "math.subtract": None, "math.negative": None,
    "identity": None, "math.multiply": "in", "math.truediv": "in", "math.divide": "in",
    "math.maximum": "in", "math.minimum": "in", "math.pow": "both", "math.abs": "in", "math.square": "in",
    "math.sqrt": "out", "math.rsqrt": "out", "math.exp": "out", "math.log": "in", "math.sigmoid": "out",
    "nn.sigmoid": "out", "math.tanh": "out", "nn.relu": "out", "nn.relu6": "in", "nn.elu": "out",
    "nn.selu": "both", "nn.silu": "in", "nn.swish": "in", "nn.gelu": "both", "nn.softplus": "in",
    "clip_by_value": "in"}


@rule("TFOpLambda")
class TFFunction(Rule):
    """One elementwise TensorFlow op, written into an input it reads last; its gradient per
    TF_FUNCTION_READS, one op per input that needs it."""

    def reads(self, node):
        return TF_FUNCTION_READS.get(node.layer.config.get("function"), "both")

    def forward(self, s, node, xs):
        function = node.layer.config.get("function")
        y = s.one(f"{node.layer.name} {function}", xs, _size(node.outputs[0].spec), forward=True)
        reads = self.reads(node)
        if reads == "in" and len(xs) < 2 and function in ("math.multiply", "math.truediv", "math.divide"):
            reads = None  # by a constant: dy times that constant
        return [y], {None: (), "in": tuple(xs), "out": (y,), "both": (*xs, y)}[reads]

    def backward(self, s, node, keep, dys, need):
        out = []
        for t, n in zip(node.inputs, need):
            if not n:
                out.append(None)
            elif not keep and self.reads(node) is None and t.spec.shape == node.outputs[0].spec.shape:
                out.append(dys[0])
            else:
                out.append(s.one(f"{node.layer.name} input gradient", [dys[0], *keep], _size(t.spec),
                                 kind="gradient"))
        return out, []



# Keras 3's comparisons and logic as operation nodes (keras.ops.not_equal(tokens, 0), a mask): one op
# making a bool tensor, and no gradient (math_grad.py: "Logical operations have no gradients",
# NotDifferentiable Less, LessEqual, Greater, GreaterEqual, Equal, NotEqual, LogicalAnd, LogicalOr,
# LogicalNot; IsNan, IsInf and IsFinite likewise). logical_xor is (x or y) and not (x and y), a few
# bool ops of the output's size taken as one.
@rule(*COMPARISONS)
class Predicate(Rule):
    def forward(self, s, node, xs):
        y = s.one(f"{node.layer.name} {node.layer.class_name}", xs, _size(node.outputs[0].spec))
        return [y], None

    def backward(self, s, node, keep, dys, need):
        return [None] * len(node.inputs), []

@rule("Dropout")
class Dropout(Rule):
    """tf.nn.dropout in training: a uniform draw, its >= rate mask (bool), x * scale, select(mask, ., 0);
    the gradient selects with the mask against a scalar zero (SelectV2's gradient, math_grad.py:
    `zeros = array_ops.zeros([])`), written into dy: no buffer of its own (traced, a wide MLP in both
    flavours: no dy-sized block besides dy at the Dropout's gradient)."""

    def noise(self, node):
        """The elements of the draw and the mask: the input's (noise_shape is the input's shape)."""
        return prod(node.outputs[0].spec.shape)

    def forward(self, s, node, xs):
        spec = node.outputs[0].spec
        size = _size(spec)
        if not float(node.layer.config.get("rate") or 0):
            return [xs[0]], None
        name = node.layer.name
        draw = s.one(f"{name} random uniform", [], self.noise(node) * _item(spec))
        mask = s.one(f"{name} keep mask", [draw], self.noise(node))
        scaled = s.one(f"{name} x*scale", [xs[0]], size, forward=True)
        y = s.one(f"{name} select", [scaled, mask], size, forward=True)
        return [y], mask

    def backward(self, s, node, keep, dys, need):
        if keep is None:
            return [dys[0] if need[0] else None], []
        size = _size(node.outputs[0].spec)
        dx = s.one(f"{node.layer.name} select gradient", [dys[0], keep], size, forward=True, kind="gradient")
        dx = s.one(f"{node.layer.name} scale gradient", [dx], size, forward=True, kind="gradient")
        return [dx if need[0] else None], []


@rule("GaussianNoise", "GaussianDropout")
class GaussianNoise(Rule):
    """In training, a normal draw of the input's shape (tf_keras's backend.random_normal, Keras 3's
    random.normal: the standard draw, then * stddev and + mean into it), added to the input
    (GaussianNoise: Add's gradient is dy itself, nothing kept) or multiplying it with mean 1
    (GaussianDropout: Mul's gradient reads the draw, kept to the backward pass). Traced in neither;
    measured: an MLP with both, both flavours, which passing them through left 13% to 15% short."""

    def forward(self, s, node, xs):
        config = node.layer.config
        spread = config.get("stddev") if node.layer.class_name == "GaussianNoise" else config.get("rate")
        if not float(spread or 0):
            return [xs[0]], None
        name, size = node.layer.name, _size(node.outputs[0].spec)
        draw = s.one(f"{name} random normal", [], size)
        draw = s.one(f"{name} draw*stddev+mean", [draw], size, forward=True)
        if node.layer.class_name == "GaussianNoise":
            return [s.one(f"{name} x+noise", [xs[0], draw], size, forward=True)], None
        return [s.one(f"{name} x*noise", [xs[0], draw], size, forward=[(0, xs[0])])], draw

    def backward(self, s, node, keep, dys, need):
        if keep is None or not need[0]:
            return [dys[0] if need[0] else None], []
        return [s.one(f"{node.layer.name} x*noise gradient", [dys[0], keep], _size(node.outputs[0].spec),
                      forward=True, kind="gradient")], []


@rule("SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D")
class SpatialDropout(Dropout):
    """tf.nn.dropout with a noise_shape of one value per sample and channel (tf_keras's and Keras 3's
    SpatialDropout*D): the draw and the mask are (batch, channels), broadcast in the select; the
    output, x * scale and the gradient are the input's size (traced: a CNN of SpatialDropout2D blocks,
    the blocks' outputs alive at the peak where the model had passed the input through)."""

    def noise(self, node):
        shape = node.outputs[0].spec.shape
        first = node.layer.config.get("data_format") == "channels_first"
        return shape[0] * (shape[1] if first else shape[-1])


@rule("MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "MaxPool1D", "MaxPool2D", "MaxPool3D")
class MaxPool(Rule):
    def forward(self, s, node, xs):
        y = s.one(f"{node.layer.name} MaxPool", [xs[0]], _size(node.outputs[0].spec))
        return [y], (xs[0], y)

    def backward(self, s, node, keep, dys, need):
        if not need[0]:
            return [None], []
        three_d = node.layer.class_name in ("MaxPooling3D", "MaxPool3D")
        return [max_pool_grad(s, node.layer.name, *keep, dys[0], _size(node.inputs[0].spec),
                              _item(node.outputs[0].spec), three_d)], []


def max_pool_grad(s, name, x, y, dy, x_bytes, item, three_d=False):
    """MaxPool's gradient, reading its input x, its output y (of `item`-byte floats) and dy: the input
    gradient's buffer."""
    if three_d:
        # MaxPool3DGrad (pooling_ops_3d.cc) compares each window with its pooled value in place:
        # no argmax and no copy of the pooled output (traced: a 3-D CNN, its peak at this op)
        return s.one(f"{name} MaxPool3DGrad", [x, y, dy], x_bytes, kind="gradient")
    # (maxpooling_op.cc MaxPoolingGradOp) the gradient takes the pooled input's memory, and its copy
    # of the pooled output that output's, where this is their last reader
    y_bytes = s.prog.bufs[y].bytes
    return s.op(f"{name} MaxPoolGrad", [x, y, dy], [(x_bytes, "gradient"), (y_bytes, "scratch")],
                scratch=kernels.max_pool_argmax(y_bytes // item), forward=[(0, x), (1, y)])[0]


@rule(*(f"Adaptive{kind}Pooling{rank}D" for kind in ("Max", "Average") for rank in (1, 2, 3)))
class AdaptivePool(Rule):
    """Keras 3's TensorFlow backend (backend/tensorflow/nn.py, _adaptive_*_pool*d), one spatial axis
    after another: pools of the small window ceil(L / O) and of one more, stride 1, VALID (L - small
    + 1 and L - small positions), their concat along the axis, and a gather of the O windows from it;
    channels_first is transposed to channels_last and back. The gradients: Gather's along an inner
    axis (array_grad.py _GatherV2Grad) transposes dy, sums it into the concat's shape
    (UnsortedSegmentSum) and transposes back; the concat's slices it for the two pools; AvgPoolGrad
    reads only shapes, MaxPoolGrad the pool's input and output (kept from the forward pass); the two
    input gradients are added."""

    def stages(self, node):
        """Per spatial axis, in the order they run: (bytes of the stage's input, of the small and the
        big window's pools, of the gather's output)."""
        layer, x = node.layer, node.inputs[0].spec
        shape = list(x.shape) if layer.channels_last() else [x.shape[0], *x.shape[2:], x.shape[1]]
        out = []
        for axis, size in enumerate(layer.ints("output_size", layer.rank), start=1):
            length, before = shape[axis], prod(shape) * _item(x)
            small = -(-length // size)
            shape[axis] = size
            per = before // length
            out.append((before, per * (length - small + 1), per * max(length - small, 0), prod(shape) * _item(x)))
        return out

    def forward(self, s, node, xs):
        name, kind = node.layer.name, node.layer.class_name[len("Adaptive"):].split("Pooling")[0]
        x, keep = xs[0], []
        if not node.layer.channels_last():
            x = s.one(f"{name} transpose to channels_last", [x], _size(node.inputs[0].spec))
        for k, (_, small, big, out) in enumerate(self.stages(node)):
            pools = [s.one(f"{name} axis {k} {kind}Pool window {w}", [x], size)
                     for w, size in (("small", small), ("big", big))]
            keep.append((x, *pools) if kind == "Max" and s.need[0] else None)
            x = s.one(f"{name} axis {k} gather", [s.one(f"{name} axis {k} concat", pools, small + big)], out)
        if not node.layer.channels_last():
            x = s.one(f"{name} transpose to channels_first", [x], _size(node.outputs[0].spec))
        return [x], keep

    def backward(self, s, node, keep, dys, need):
        if not need[0]:
            return [None], []
        name, dy = node.layer.name, dys[0]
        if not node.layer.channels_last():
            dy = s.one(f"{name} transpose to channels_first gradient", [dy], _size(node.outputs[0].spec),
                       kind="gradient")
        for k, (before, small, big, out) in reversed(list(enumerate(self.stages(node)))):
            t = s.one(f"{name} axis {k} gather gradient transpose", [dy], out, kind="gradient")
            t = s.one(f"{name} axis {k} gather gradient (UnsortedSegmentSum)", [t], small + big, kind="gradient")
            t = s.one(f"{name} axis {k} gather gradient transpose back", [t], small + big, kind="gradient")
            grads = []
            for j, (w, size) in enumerate((("small", small), ("big", big))):
                d = s.one(f"{name} axis {k} concat gradient {w}", [t], size, kind="gradient")
                if keep[k] is not None:
                    grads.append(max_pool_grad(s, f"{name} axis {k} window {w}", keep[k][0], keep[k][1 + j], d, before,
                                               _item(node.outputs[0].spec), node.layer.rank == 3))
                else:
                    grads.append(s.one(f"{name} axis {k} window {w} AvgPoolGrad", [d], before, kind="gradient"))
            dy = s.one(f"{name} axis {k} input gradient (AddN)", grads, before, forward=True, kind="gradient")
        if not node.layer.channels_last():
            dy = s.one(f"{name} transpose to channels_last gradient", [dy], _size(node.inputs[0].spec), kind="gradient")
        return [dy], []


# Preprocessing and augmentation layers that run in a training step (keras.layers; Keras 3's image
# augmentations), each making a new tensor of its output's shape
PREPROCESSING = ("CategoryEncoding", "Discretization", "Hashing", "IntegerLookup", "StringLookup", "TextVectorization",
                 "RandomBrightness", "AutoContrast", "Equalization", "RandomColorJitter", "RandomErasing",
                 "RandomGaussianBlur", "RandomGrayscale", "RandomHue", "RandomInvert", "RandomPosterization",
                 "RandomSaturation", "RandomSharpness", "Solarization", *AUGMENTATIONS, "RandomHeight", "RandomWidth",
                 "HashedCrossing")


@rule("AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "AvgPool1D", "AvgPool2D", "AvgPool3D",
      "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D", "GlobalAvgPool1D",
      "GlobalAvgPool2D", "GlobalAvgPool3D", "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D",
      "Cropping1D", "Cropping2D", "Cropping3D", "UpSampling2D",
      "Permute", "RepeatVector", "Resizing", "CenterCrop", "Rescaling", "Normalization",
      *PREPROCESSING)
class Reshaping(Rule):
    """An op that makes a new output and whose gradient needs only shapes (AvgPoolGrad, a mean's
    broadcast, Pad's Slice, Transpose back). The PREPROCESSING layers make a new output too, and sit
    where no gradient reaches them (before every trainable weight; a lookup's output is integers)."""

    def forward(self, s, node, xs):
        y = s.one(f"{node.layer.name} {node.layer.class_name}", [xs[0]], _size(node.outputs[0].spec))
        return [y], None

    def backward(self, s, node, keep, dys, need):
        if not need[0]:
            return [None], []
        return [s.one(f"{node.layer.name} input gradient", [dys[0]], _size(node.inputs[0].spec),
                      kind="gradient")], []


@rule("UpSampling1D", "UpSampling3D")
class RepeatElements(Reshaping):
    """tf_keras repeats along each axis with backend.repeat_elements (UpSampling1D on its steps,
    UpSampling3D's resize_volumes on depth, height, then width): a split of the axis into one slice
    per element, then a concat of each slice `size` times. The concat's gradient splits the output's
    gradient into as many slices, all alive until the AddNs of each element's copies, then the
    split's gradient concatenates those (traced: a Conv3D autoencoder's UpSampling3D at batch 4, the
    32 slices of its last axis, as large as the output's gradient together, at the step's peak).
    Keras 3 tiles (ops.repeat): Reshaping's rule."""

    def steps(self, node):
        """(the tensor's bytes before, after) each axis's repeat, in the order they run: the layer's
        own shape rule (keras.layers.reshaping.UpSampling) applied one axis at a time."""
        layer, x = node.layer, node.inputs[0].spec
        shape, item, first = list(x.shape), _item(x), layer.first_spatial_axis()
        out = []
        for i in range(layer.rank):
            before = prod(shape) * item
            shape[first + i] = layer.resize(i, shape[first + i])
            out.append((before, prod(shape) * item))
        return out

    def forward(self, s, node, xs):
        if s.flavour != "tf_keras":
            return super().forward(s, node, xs)
        y = xs[0]
        for k, (before, after) in enumerate(self.steps(node)):
            slices = s.one(f"{node.layer.name} split {k}", [y], before)
            y = s.one(f"{node.layer.name} concat {k}", [slices], after)
        return [y], None

    def backward(self, s, node, keep, dys, need):
        if s.flavour != "tf_keras" or not need[0]:
            return super().backward(s, node, keep, dys, need)
        dy = dys[0]
        for k, (before, after) in reversed(list(enumerate(self.steps(node)))):
            slices = s.one(f"{node.layer.name} concat {k} gradient (split)", [dy], after, kind="gradient")
            dy = s.one(f"{node.layer.name} split {k} gradient (AddN, concat)", [slices], before, kind="gradient")
        return [dy], []


@rule("GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D", "GlobalMaxPool1D", "GlobalMaxPool2D",
      "GlobalMaxPool3D")
class GlobalMax(Rule):
    """Max over axes. Its gradient (_MaxGrad, math_grad.py) compares the input with the output, a bool
    and then a float indicator of the input's size, and divides it by the count of maxima: none of
    that reads the output's gradient, so TensorFlow's executor runs it in the forward pass, right
    after the Max, and the indicator lives until the backward multiplies it by the gradient, into
    its memory (traced: tf_keras's text CNN, three such indicators alive at once)."""

    def forward(self, s, node, xs):
        y = s.one(f"{node.layer.name} Max", [xs[0]], _size(node.outputs[0].spec))
        if not s.need[0]:
            return [y], None
        spec = node.inputs[0].spec
        eq = s.one(f"{node.layer.name} equal", [xs[0], y], prod(spec.shape), kind="gradient")
        return [y], s.one(f"{node.layer.name} indicators", [eq], _size(spec), kind="gradient")

    def backward(self, s, node, keep, dys, need):
        if not need[0]:
            return [None], []
        return [s.one(f"{node.layer.name} input gradient", [keep, dys[0]], _size(node.inputs[0].spec),
                      forward=True, kind="gradient")], []


MERGING = ("Add", "Average", "Subtract", "Maximum", "Minimum", "Multiply", "Concatenate", "Dot")
JOINS = MERGING + ("CustomScaleLayer", "Merge")  # layers where branches of a model join


@rule(*MERGING)
class Merge(Rule):
    """Add (AddV2/AddN, into an input read last) hands its gradient to every input unchanged; Subtract
    negates one; Multiply, Maximum, Minimum read both inputs; Concatenate's gradient slices."""

    @staticmethod
    def kind(s, node):
        return node.layer.class_name

    def forward(self, s, node, xs):
        cls = self.kind(s, node)
        inplace = cls in ("Add", "Average", "Subtract")
        y = s.one(f"{node.layer.name} {cls}", xs, _size(node.outputs[0].spec), forward=inplace)
        return [y], list(xs) if cls in ("Multiply", "Maximum", "Minimum", "Dot") else None

    def backward(self, s, node, keep, dys, need):
        cls = self.kind(s, node)
        out = []
        for k, (t, n) in enumerate(zip(node.inputs, need)):
            if not n:
                out.append(None)
            elif cls == "Add" and t.spec.shape == node.outputs[0].spec.shape:
                out.append(dys[0])
            elif cls == "Multiply" and len(node.inputs) == 2:
                out.append(self.product_gradient(s, node, k, keep, dys[0]))
            else:
                reads = [dys[0]] + (list(keep) if keep else [])
                out.append(s.one(f"{node.layer.name} input {k} gradient", reads, _size(t.spec), kind="gradient"))
        return out, []

    @staticmethod
    def product_gradient(s, node, k, keep, dy):
        """x * y's gradient for input k (math_grad.py _MulGrad): dy times the other input, as large as
        the output, into dy's memory where it reads dy last; an input broadcast to the output's shape
        (a squeeze-and-excitation scale) gets that product summed over the broadcast axes."""
        out, spec = node.outputs[0].spec, node.inputs[k].spec
        name = f"{node.layer.name} input {k} gradient"
        g = s.op(name + (" dy*x" if spec.shape != out.shape else ""), [dy, keep[1 - k]], [_size(out)],
                 forward=[(0, dy)], kind="gradient")[0]
        return g if spec.shape == out.shape else s.one(name, [g], _size(spec), kind="gradient")


# Keras's legacy Merge (Keras 1; keras/legacy/layers.py in Keras 2.0-2.1): its call is the merge layer of
# its mode (sum adds, mul multiplies, ave adds then divides, max is K.maximum, concat concatenates, dot
# is K.batch_dot). cos is three batch_dots, a sqrt, a maximum and a division: taken as the one batch_dot
# and reported as undercounted.
LEGACY_MERGE = {"sum": "Add", "mul": "Multiply", "ave": "Average", "max": "Maximum", "concat": "Concatenate",
                "dot": "Dot", "cos": "Dot"}


@rule("Merge")
class LegacyMerge(Merge):
    @staticmethod
    def kind(s, node):
        return LEGACY_MERGE.get(node.layer.config.get("mode", "sum"), "Dot")

    def forward(self, s, node, xs):
        if node.layer.config.get("mode") == "cos":
            s.undercounted.append((node.layer.name, "Merge mode cos: the inputs' norms (two more batch_dots), "
                                                    "their sqrt and the division are left out"))
        return super().forward(s, node, xs)


@rule("CustomScaleLayer")
class ScaledResidual(Rule):
    """InceptionResNetV2's `inputs[0] + inputs[1] * scale`: a Mul by the constant, into the residual
    where it reads it last, and an AddV2 into that. The gradient (math_grad.py _AddGrad, _MulGrad)
    hands dy to the shortcut unchanged and makes dy * scale for the residual: nothing is kept."""

    def forward(self, s, node, xs):
        name = node.layer.name
        scaled = s.one(f"{name} residual*scale", [xs[1]], _size(node.inputs[1].spec), forward=True)
        return [s.one(f"{name} shortcut+residual", [xs[0], scaled], _size(node.outputs[0].spec), forward=True)], None

    def backward(self, s, node, keep, dys, need):
        out = node.outputs[0].spec
        short = dys[0] if need[0] and node.inputs[0].spec.shape == out.shape else None
        if need[0] and short is None:
            short = s.one(f"{node.layer.name} shortcut gradient", [dys[0]], _size(node.inputs[0].spec), kind="gradient")
        residual = (s.one(f"{node.layer.name} residual gradient", [dys[0]], _size(node.inputs[1].spec), kind="gradient")
                    if need[1] else None)
        return [short, residual], []


@rule("LayerScale")
class LayerScale(_Weighted):
    """ConvNeXt's `x * gamma`, one Mul broadcasting gamma over the last axis. Its gradient (math_grad.py
    _MulGrad) reads both operands, so the input is kept: the input's gradient is dy * gamma, of the
    input's size; gamma's is x * dy, a temporary of that size, summed over every axis but the last."""

    def forward(self, s, node, xs):
        return [s.one(f"{node.layer.name} x*gamma", [xs[0]], _size(node.outputs[0].spec))], xs[0]

    def backward(self, s, node, keep, dys, need):
        size = _size(node.inputs[0].spec)
        dx = s.one(f"{node.layer.name} input gradient", [dys[0]], size, kind="gradient") if need[0] else None
        return [dx], self.grads(s, node, node.layer.name, [dys[0], keep], scratch=size)


@rule("Embedding")
class Embedding(_Weighted):
    """ResourceGather; its gradient is IndexedSlices of the output gradient and the ids (the ids are
    kept), applied sparsely by the optimizer. Its values are the output gradient itself, reshaped
    (traced, the fastText model with momentum SGD at batch 128: the 6,553,600-byte output gradient
    alive at the optimizer's peak, in both flavours, and no copy of it)."""

    def forward(self, s, node, xs):
        y = s.one(f"{node.layer.name} Gather", [xs[0]], _size(node.outputs[0].spec))
        return [y], xs[0]

    def backward(self, s, node, keep, dys, need):
        grads = []
        for w in s.weights_of(node):
            if w.trainable and w.name == "embeddings":
                g = s.op(f"{node.layer.name} embeddings gradient (IndexedSlices)", [dys[0], keep],
                         [_size(node.outputs[0].spec)], forward=[(0, dys[0])], kind="weight gradient")[0]
                s.sparse[g] = nbytes(w)
                grads.append((w, g))
        return [None], grads


@rule("ReversibleEmbedding")
class ReversibleEmbedding(Embedding):
    """Keras 3's reversible_embedding.py: the call is Embedding's lookup; the reverse call is
    matmul(x, transpose(embeddings)) (or x times reverse_embeddings where tie_weights is false), a
    tensordot whose reshapes share memory. Grappler folds the Transpose into the MatMul (traced: a tied
    language model's `FoldTransposeIntoMatMul_MatMul`, the 16 x 32 x 5000 logits and no copy of the
    table), so the table is read in place and its gradient x^T dy comes out in its own layout.
    MatMul's gradient (math_grad.py _MatMulGrad) reads both operands, so x is kept. The soft cap
    tanh(logits / cap) * cap keeps tanh's output (nn_grad's TanhGrad); the divide and the tanh write
    into their input."""

    def forward(self, s, node, xs):
        x, out = node.inputs[0].spec, node.outputs[0].spec
        if len(out.shape) != len(x.shape):  # the lookup
            return super().forward(s, node, xs)
        name, tied = node.layer.name, self.table(s, node).name == "embeddings"
        rows, inner, cols = prod(x.shape[:-1]), x.shape[-1], out.shape[-1]
        scratch = kernels.contraction(rows, inner, cols, _item(out), tied) if s.device == "cpu" else 0
        z = s.one(f"{name} MatMul", [xs[0]], _size(out), scratch=scratch)
        tanh = None
        if node.layer.config.get("logit_soft_cap") is not None:
            tanh = s.one(f"{name} tanh(logits / cap)", [s.one(f"{name} logits / cap", [z], _size(out), forward=True)],
                         _size(out), forward=True)
            z = s.one(f"{name} * cap", [tanh], _size(out))
        return [z], (xs[0], tanh)

    def table(self, s, node):
        """The variable the reverse call multiplies by."""
        names = {w.name: w for w in s.weights_of(node)}
        return names.get("reverse_embeddings") or names["embeddings"]

    def backward(self, s, node, keep, dys, need):
        if not isinstance(keep, tuple):
            return super().backward(s, node, keep, dys, need)
        x, tanh = keep
        name, table, out = node.layer.name, self.table(s, node), node.outputs[0].spec
        dz = dys[0]
        if tanh is not None:
            dz = s.one(f"{name} * cap gradient", [dz], _size(out), forward=True, kind="gradient")
            dz = s.one(f"{name} tanh gradient", [dz, tanh], _size(out), forward=True, kind="gradient")
            dz = s.one(f"{name} logits / cap gradient", [dz], _size(out), forward=True, kind="gradient")
        rows, inner, cols = prod(node.inputs[0].spec.shape[:-1]), node.inputs[0].spec.shape[-1], out.shape[-1]
        cpu = s.device == "cpu"
        grads = []
        if table.trainable:
            grads.append((table, s.one(f"{name} {table.name} gradient", [x, dz], nbytes(table), kind="weight gradient",
                                       scratch=kernels.contraction(inner, rows, cols, _item(out), True) if cpu else 0)))
        dx = None
        if need[0]:
            dx = s.one(f"{name} input gradient", [dz], _size(node.inputs[0].spec), kind="gradient",
                       scratch=kernels.contraction(rows, cols, inner, _item(out), True) if cpu else 0)
        s.one(f"{name} gradient done", [dz, x], 0)
        return [dx], grads


@rule("SimpleRNN", "GRU", "LSTM", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "Bidirectional", "RNN")
class Recurrent(_Weighted):
    """A while loop over time steps (the CPU code path; cuDNN's kernel is a GPU choice): the gradient
    keeps, in TensorLists, every step's tensors its ops read: the step's input, the previous state,
    and the gates' outputs (LSTM: 4 gates, the cell, tanh of the cell; GRU: 3 gates and the candidate);
    the backward loop makes the input's gradient and accumulates the weights'."""

    # unit-sized tensors each step keeps for the gradient, besides the step's input. tf_keras's
    # standard_lstm step: 7, split's 4 (i, f, o and the candidate), Mul's 2, Tanh's 1 (traced: a
    # character LSTM, a bidirectional LSTM, an LSTM autoencoder; the layer's input is not kept); its GRU (reset_after):
    # h_tm1, z, r, the recurrent projection, hh, plus the outputs: 6. Keras 3's fused LSTM step keeps
    # 7: i, f, o and the candidate (split's buffers, which the activations take over), c, tanh(c) and
    # h; its GRU 6 (two of split's, two Mul's, a strided_slice and 1 - z): traced, an LSTM text model,
    # a bidirectional LSTM, two stacked LSTMs, a GRU text model.
    # A ConvLSTM2D step in Keras 3 keeps 7: its four input convolutions, two Muls and a Tanh; in
    # tf_keras 10 to 12 (11 counted): its gates' default hard_sigmoid is a clip_by_value, whose
    # Minimum and output both stay, with the BiasAdds of its input convolutions, the Muls and a Tanh
    # (traced, two stacked ConvLSTM2D of 16 and 8 filters on 8 frames of 32 x 32, batch 16, both
    # flavours: every step's tensors of both layers alive at the peak).
    # A SimpleRNN step keeps one: its output, which the next step's recurrent MatMul and its tanh's
    # gradient read (traced in both flavours, an Embedding-SimpleRNN text model at batch 64: at the
    # peak, 80 step inputs, 80 step outputs and the 80 zeros of the input's gradient list, 655,360
    # bytes each, and no more: neither the layer's input nor a partial weight gradient per iteration).
    KEPT = {("tf_keras", "SimpleRNN"): 1, ("tf_keras", "GRU"): 6, ("tf_keras", "LSTM"): 7,
            ("tf_keras", "ConvLSTM2D"): 11, ("keras3", "SimpleRNN"): 1, ("keras3", "GRU"): 6,
            ("keras3", "LSTM"): 7, ("keras3", "ConvLSTM2D"): 7}

    def cell(self, node):
        """(the recurrent layer's class, its config, directions): a Bidirectional's inner layer; for
        keras.layers.RNN around a built-in cell, that cell's layer (the same loop); ConvLSTM1D and
        ConvLSTM3D as ConvLSTM2D (the same step over one spatial axis fewer or more)."""
        cls, config, directions = node.layer.class_name, node.layer.config, 1
        if cls == "Bidirectional":
            inner = config.get("layer", {})
            cls, config, directions = inner.get("class_name", "LSTM"), inner.get("config", {}), 2
        if cls == "RNN":
            cell = config.get("cell") or {}
            cls, config = CELL_LAYERS.get(cell.get("class_name"), "LSTM"), dict(
                cell.get("config") or {}, return_sequences=config.get("return_sequences", False))
        if cls.startswith("ConvLSTM"):
            cls = "ConvLSTM2D"
        return cls, config, directions

    # The cell's own step (implementation 1), which recurrent_dropout forces in both Kerases (gru.py,
    # lstm.py: `if recurrent_dropout: implementation = 1`) and which runs off the fused step: per
    # step it keeps (unit-sized tensors, slices of the recurrent kernel, pieces of the kernel,
    # input-sized tensors besides the step's input when `dropout` masks the inputs). Traced (one
    # GRU(64) or LSTM(64) with recurrent_dropout on 50 steps of 10 features, batch 32, both
    # flavours; the names are the cell's ops): tf_keras's GRU keeps the masked states, the
    # biased input projections and the state masks, three of each, and 1 - z; Keras 3's the three
    # projections, the three masked states and 1 - z; their LSTMs four of each and tanh(c), Keras 3
    # without the masks; each step slices the recurrent kernel by gate (strided_slice, u x u), and
    # the LSTM splits its kernel in four (in x u).
    CELL_STEP = {("tf_keras", "GRU"): (10, 3, 0, 3), ("keras3", "GRU"): (7, 3, 0, 3),
                 ("tf_keras", "LSTM"): (13, 4, 4, 4), ("keras3", "LSTM"): (9, 4, 4, 4)}

    # A GRU with reset_after off has no fused step in either Keras (tf_keras's _could_use_gpu_kernel and
    # Keras 3's cudnn_ok both require reset_after), so it runs the cell's own step, which without
    # recurrent_dropout keeps 9 unit-sized tensors a step: two of split's, two Mul's, a strided_slice,
    # the MatMul of r * h_tm1, 1 - z, and a strided_slice of two units (traced, two stacked GRU(64)
    # on 50 steps, batch 64, both flavours, every step's at the peak) and no slice of a kernel.
    NO_RESET_AFTER = (9, 0, 0, 0)

    # An LSTM or GRU whose activations, bias or unrolling the fused step does not take (tf_keras's
    # _could_use_gpu_kernel, Keras 3's cudnn_ok: tanh, sigmoid gates, a bias, no unroll) runs its cell's
    # own step too: with sigmoid gates it keeps what the fused step keeps (traced, LSTM(64) and GRU(64)
    # with relu on 50 steps of 10 features, batch 32, both flavours: 7 and 6 a step). hard_sigmoid
    # gates (Keras 2.2's default) keep more: tf_keras's `0.2 * x + 0.5` clipped keeps the Mul, the
    # Minimum and the clip of each gate, Keras 3's `x / 6 + 0.5` clipped its quotient (traced: LSTM 16
    # and 10 a step, GRU 12 and 8). Implementation 1 computes each gate apart: every step slices the
    # recurrent kernel by gate (u x u) and an LSTM splits its kernel in four (in x u) (traced: LSTM(64)
    # with 10 and with 100 features), and its gradient loop is the cell path's (cell_path); under
    # implementation 2 the loop is the fused step's, with these tensors (off_fused). Inputs masked by
    # `dropout` keep one input-sized tensor a gate (traced: tf_keras's LSTM, 4 a step). Measured on real
    # users' files (tests/data/keras_oracle/real): their hard_sigmoid LSTMs, -35%, -64% and -66% before.
    GATES = {"LSTM": 3, "GRU": 2}  # the gates hard_sigmoid applies to: i, f, o; z, r
    HARD_SIGMOID_KEPT = {"tf_keras": 3, "keras3": 1}  # what a hard_sigmoid gate keeps beyond a sigmoid's

    def fused(self, config):
        """Whether the layer's step is the fused one (standard_lstm / standard_gru and Keras 3's)."""
        return (act_name(config.get("activation", "tanh")) == "tanh"
                and act_name(config.get("recurrent_activation", "sigmoid")) == "sigmoid"
                and config.get("use_bias", True) and not config.get("unroll"))

    def cell_path(self, s, node):
        """(unit-sized, recurrent slices, kernel pieces, input-sized) kept per step where the layer
        runs its cell's own step (recurrent_dropout, a GRU without reset_after, or an LSTM or GRU off
        the fused step), else None."""
        cls, config, _ = self.cell(node)
        if cls not in self.GATES:
            return None
        hard = act_name(config.get("recurrent_activation", "sigmoid")) == "hard_sigmoid"
        extra = self.GATES[cls] * self.HARD_SIGMOID_KEPT[s.flavour] if hard else 0
        if float(config.get("recurrent_dropout") or 0):
            path = self.CELL_STEP.get((s.flavour, cls))
        elif cls == "GRU" and not config.get("reset_after", True):
            path = self.NO_RESET_AFTER
        elif not self.fused(config) and self.gates_apart(s, config):
            gates = self.GATES[cls] + 1
            path = (self.KEPT[(s.flavour, cls)], gates, gates if cls == "LSTM" else 0, gates)
        else:
            return None
        return None if path is None else (path[0] + extra,) + tuple(path[1:])

    @staticmethod
    def gates_apart(s, config):
        """Implementation 1: each gate computed apart. tf_keras runs Keras 2.0's implementation 0 as 1
        (its recurrent layers warn that "`implementation=0` has been deprecated, and now defaults to
        `implementation=1`"; traced, a user's three LSTM(512) of implementation 0 slice their kernels
        every step, 4 of each kind)."""
        impl = config.get("implementation")
        impl = 2 if impl is None else int(impl)
        return impl == 1 or (impl == 0 and s.flavour == "tf_keras")

    def off_fused(self, s, node):
        """(unit-sized, input-sized) tensors a step keeps where an LSTM or GRU computes its gates
        together (implementation 2) off the fused step: the fused step's loop with the hard sigmoids'
        tensors and the masked inputs, else None."""
        cls, config, _ = self.cell(node)
        if cls not in self.GATES or self.fused(config) or self.cell_path(s, node) is not None:
            return None
        hard = act_name(config.get("recurrent_activation", "sigmoid")) == "hard_sigmoid"
        extra = self.GATES[cls] * self.HARD_SIGMOID_KEPT[s.flavour] if hard else 0
        return self.KEPT[(s.flavour, cls)] + extra, (self.GATES[cls] + 1 if float(config.get("dropout") or 0) else 0)

    def no_reset_after(self, node):
        cls, config, _ = self.cell(node)
        return cls == "GRU" and not config.get("reset_after", True) and not float(config.get("recurrent_dropout") or 0)

    def per_step(self, s, node):
        cls, config, directions = self.cell(node)
        x = node.inputs[0].spec
        batch, steps = x.shape[0], x.shape[1]
        units = int(config.get("units") or config.get("filters") or 1)
        item = _item(x)
        unit_bytes = batch * units * item
        step_in = prod(x.shape[2:]) * batch * item
        if cls == "ConvLSTM2D":
            unit_bytes = _size(node.outputs[0].spec) // (steps if config.get("return_sequences") else 1)
        path = self.cell_path(s, node)
        if path is not None:
            unit, slices, pieces, inputs = path
            features = prod(x.shape[2:])
            masked = inputs if float(config.get("dropout") or 0) else 0
            wanted = bool(s.need and s.need[0])  # the layer's input gradient
            recurrent_dropout = bool(float(config.get("recurrent_dropout") or 0))
            if masked and recurrent_dropout and s.flavour == "tf_keras" and wanted:
                # tf_keras's cell makes its input dropout masks inside the loop's step, so each step keeps
                # its gates' masks, which the input's gradient reads, beside the masked inputs (traced: a
                # user's LSTM(50) with dropout and recurrent_dropout 0.5 over 200 steps of 32 features, 8.9
                # input-sized blocks a step at the peak: -12.3% before, -5.7% now)
                masked *= 2
            if recurrent_dropout and not wanted:
                # nor the kernel's pieces, which only the input's gradient reads (traced: a user's
                # Bidirectional LSTM stack with recurrent_dropout on a frozen Embedding, none of its first
                # layer's 204,800-byte pieces at the peak, 4 masked inputs a step: +19.9% before, +0.4% now)
                pieces = 0
            kept = (unit * unit_bytes + slices * units * units * item + pieces * features * units * item
                    + masked * step_in)
            return steps, directions * (step_in + kept), directions * unit_bytes
        kept, masked = self.off_fused(s, node) or (self.KEPT.get((s.flavour, cls), 9), 0)
        return steps, directions * ((1 + masked) * step_in + kept * unit_bytes), directions * unit_bytes

    def listed(self, s, node):
        """Whether the input's gradient is a list of zeros, one per step, made as soon as the forward
        loop ends and set step by step by the gradient loop (Keras 3's fused LSTM and GRU; traced:
        zeros_like of every step's input, alive until the layer's gradient loop has run). A SimpleRNN
        or a GRU without reset_after makes it in both flavours where its input's gradient is wanted
        (traced: two stacked bidirectional SimpleRNNs, both layers' lists, one per direction, alive at
        the second layer's gradient loop)."""
        path = self.cell_path(s, node)
        if self.no_reset_after(node) or self.cell(node)[0] == "SimpleRNN":
            # the same list in both flavours where the input's gradient is wanted
            return bool(s.need and s.need[0])
        return s.flavour == "keras3" and self.cell(node)[0] in ("LSTM", "GRU") and path is None

    def in_flight(self, s, node, steps, per_step):
        """What the gradient loop holds with its iterations in flight, beyond the lists, where the input's
        gradient is listed: each iteration's partial weight gradients (an LSTM's: kernel, recurrent
        kernel and bias, one direction at a time) and all but one iteration's step input gradient, less
        the step tensors those iterations have popped. Traced in Keras 3 at the peak, 31 or 32 of each
        partial (an LSTM text model, a bidirectional LSTM's forward direction with the backward's lists
        whole, two stacked LSTMs); a GRU's loops held one to fifteen recurrent-kernel partials (a GRU text
        model) or none (a GRU tagger, a GRU with a Dense on its sequence), so none is counted for it."""
        directions = self.cell(node)[2]
        flight = min(PARALLEL_ITERATIONS, steps)
        step_in = _size(node.inputs[0].spec) // steps
        return max(0, self.partials(s, node, steps) + (flight - 1) * (step_in - per_step // directions))

    @staticmethod
    def decoder(node):
        """Whether the layer is a decoder: called with initial_state (an encoder's states), or fed,
        directly or through other layers, by a RepeatVector (an encoder's output repeated over the
        steps: a stacked decoder's layers too)."""
        return len(node.inputs) > 1 or any(made.layer.class_name == "RepeatVector" for made in _upstream(node))

    def loop_workspace(self, s, node):
        """sgemm's workspace (kernels.gemm_workspace), held by whichever of the gradient loop's MatMuls runs
        at the peak on the CPU (traced: a user's LSTM(50) over one step at batch 32, the 74,176-byte
        workspace and a 31,040-byte packed block alive at the step's peak, the recurrent kernel's partial
        gradient running; the packed blocks, which depend on the shapes and on which MatMul runs, are
        not counted: counted as the largest product's, they took as many configurations out as in).
        0 off the CPU or for a ConvLSTM, whose products are convolutions."""
        if s.device != "cpu" or self.cell(node)[0] not in ("LSTM", "GRU", "SimpleRNN"):
            return 0
        return kernels.gemm_workspace(_item(node.inputs[0].spec))

    @staticmethod
    def masked(node):
        """Whether the layer's input carries a Keras mask (an Embedding with mask_zero, a Masking layer,
        through the layers that hand a mask on). tf_keras's LSTM then steps with a select of the new and
        the old states, and its gradient loop holds one partial of each weight, not one per iteration in
        flight; the list of the steps' input gradients is alive with every step's tensors when it is
        stacked, the step's peak (traced: a user's Embedding(mask_zero) + LSTM(256) over 350 steps, 9 step
        tensors of 32 KB a step and the stacked input gradient, 119.9 MB where 32 partials made 173.5 MB;
        an Embedding-masked LSTM(32) and a Masking + LSTM(48), none of their partials at the peak)."""
        def hands_mask_on(made):
            cls, config = made.layer.class_name, made.layer.config
            return cls in MASK_PASSING or (cls in ("LSTM", "GRU", "SimpleRNN", "Bidirectional") and config.get(
                "return_sequences", config.get("layer", {}).get("config", {}).get("return_sequences")))

        return any(made.layer.class_name == "Masking" or (made.layer.class_name == "Embedding"
                                                          and made.layer.config.get("mask_zero"))
                   for made in _upstream(node, hands_mask_on))

    def keeps_dropout_masks(self, s, node):
        """tf_keras's Bidirectional LSTM or GRU on the fused step with input `dropout`, whose input's gradient
        is wanted: each direction's input-sized dropout mask, which that gradient is multiplied by, is held
        from the forward pass to the layer's backward (traced: a user's Bidirectional(GRU(64), dropout 0.2)
        over 500 steps of 100 features, two 6,400,000-byte blocks at the peak: -10.3% before, -0.9% now). A
        stack of three unidirectional LSTMs with dropout held one such block at its peak, where counting
        each layer's took it from +8.0% to +11.6%: not counted for them."""
        cls, config, directions = self.cell(node)
        return (s.flavour == "tf_keras" and directions == 2 and cls in self.GATES
                and bool(float(config.get("dropout") or 0)) and bool(s.need and s.need[0])
                and self.cell_path(s, node) is None and self.off_fused(s, node) is None)

    def runs_ahead(self, node):
        """Whether tf_keras's GRU gradient loop runs its iterations' recurrent-kernel partial gradients ahead
        of their accumulation: where no step's output gradient comes in from outside (the last output only),
        no mask selects the states and the layer is no decoder. Traced: a user's GRU(128) over 52 steps (34
        of them at the peak) and a GRU(1024) stack (24); the oracle's GRUs on a sequence's gradient (a tagger,
        a GRU with a Dense on its sequence) held none to fifteen. Measured: four real users' GRUs came within
        10% so (-59.2% to -2.5% the largest) and two of the oracle's, and none went out."""
        config = self.cell(node)[1]
        return not config.get("return_sequences") and not self.masked(node) and not self.decoder(node)

    def partials(self, s, node, steps):
        """An LSTM's partial weight gradients, one of each weight per gradient-loop iteration in flight,
        one direction of a Bidirectional at a time; none for a GRU (traced: see in_flight). tf_keras's LSTM
        off the fused step (relu, swish...) holds its kernel's, and its recurrent kernel's only over a few
        steps (traced: a relu LSTM stack over 30 steps of 1,662 features, 32 kernel partials of 1.7 MB and
        no recurrent one at the peak; a relu LSTM(50) over 40 steps, none; a swish LSTM stack over 5 steps,
        6 of its second layer's recurrent kernel: +12.5%, +47.8% and -3.2% before, +9.5%, -2.4% and -1.5%
        now; where between 5 and 30 steps they stop is not traced: FEW_STEPS is a guess)."""
        cls, config, directions = self.cell(node)
        if cls != "LSTM":
            return 0
        ws = [w for w in s.weights_of(node) if w.trainable]
        if not self.fused(config) and s.flavour == "tf_keras":
            recurrent = sum(nbytes(w) for w in ws if w.name.endswith("recurrent_kernel"))
            kernel = sum(nbytes(w) for w in ws if w.name.endswith("kernel")) - recurrent
            held = min(PARALLEL_ITERATIONS, steps) * kernel + ((steps + 1) * recurrent if steps < FEW_STEPS else 0)
            return held // directions
        weights = sum(nbytes(w) for w in ws)
        return min(PARALLEL_ITERATIONS, steps) * weights // directions

    def forward(self, s, node, xs):
        steps, per_step, unit = self.per_step(s, node)
        name = node.layer.name
        cls, config, directions = self.cell(node)
        path = self.cell_path(s, node)
        if float(config.get("recurrent_dropout") or 0) and path is None:
            s.undercounted.append((name, f"recurrent_dropout on a {cls}: the masks its cell's own step keeps are "
                                         "not counted (measured only on GRU and LSTM)"))
        mask = (s.one(f"{name} input dropout masks", xs, directions * _size(node.inputs[0].spec))
                if self.keeps_dropout_masks(s, node) else None)
        lists = s.one(f"{name} per-step tensors kept for the gradient", xs + [mask], steps * per_step)
        y = s.one(f"{name} output", [lists], _size(node.outputs[0].spec))
        states = [s.one(f"{name} final state", [lists], _size(t.spec)) for t in node.outputs[1:]]
        # the counts of tf_keras's GRU, of the cell's own step and of ConvLSTM2D were measured with the
        # layer's input held to the backward pass; an LSTM's and a listed GRU's traces show it gone
        listed = self.listed(s, node)
        held = None if cls in ("SimpleRNN", "LSTM") or listed else xs[0]
        zeros = (s.one(f"{name} input gradient list (zeros until each step sets its own)", [lists],
                       directions * _size(node.inputs[0].spec), kind="gradient") if listed else None)
        if s.device == "cpu":  # the executor's state of the while loops' iterations in flight, up to
            # parallel_iterations at once: host heap blocks beside the tensors. A SimpleRNN's forward
            # loop's from the loop to the step's end (traced, four loops' blocks at the stacked SimpleRNNs'
            # peak); an LSTM's or GRU's only while it runs (traced at the peaks of six LSTM models and
            # three GRU models, both flavours: one group of blocks per gradient loop, none of a forward
            # loop); the gradient loop's (its counter runs ahead of the data) until its layer's backward
            # pass is done
            each = CELL_LOOP_STATE if path is not None else LOOP_STATE.get(cls, LOOP_STATE["LSTM"])
            state = directions * min(PARALLEL_ITERATIONS, steps) * each
            fwd = s.one(f"{name} while-loop iteration state", [], state, kind="loop state")
            if cls not in ("LSTM", "GRU") or path is not None:
                s.prog.hold(fwd)
            back = s.one(f"{name} gradient while-loop iteration state", [], state, kind="loop state")
        else:
            back = None
        return [y, *states], (held, lists, back, zeros, mask)

    def backward(self, s, node, keep, dys, need):
        """The backward loop reads every output's gradient (the sequence's and the final states') and
        makes the input's and, for initial_state tensors, each state's gradient."""
        x, lists, back, zeros, mask = keep
        steps, per_step, unit = self.per_step(s, node)
        name = node.layer.name
        # the gradient while loop runs up to parallel_iterations (32) steps at once
        path = self.cell_path(s, node)
        cls = self.cell(node)[0]
        if zeros is not None:
            loop = 8 * unit + self.in_flight(s, node, steps, per_step)
        elif path is None and s.flavour == "tf_keras" and cls == "LSTM":
            # a partial gradient of every weight per iteration in flight, its steps' tensors read from
            # the lists, not popped: traced, 31 to 32 of each kernel's with every step's tensors alive
            # (a character LSTM, a bidirectional LSTM); an LSTM autoencoder's decoder held one of each,
            # so this is the high end. A decoder's loop adds each iteration's partials as they come
            # (decoder): traced, a character seq2seq's decoder held two of its recurrent kernel's and one
            # of its kernel's at the peak (+64.5% before, +2.5% now; an encoder-decoder on states and
            # Keras's seq2seq, +22% and +64%, now +1% and +6%), and three autoencoders' decoders on a
            # RepeatVector none or one (+23%, +35% and +32% before, -5%, -1% and -2% now); a stacked
            # decoder's second layer is one too (measured, not traced: +10.8% and +20.9% before, +0.6%
            # and +1.0% now)
            masked = self.masked(node)
            loop = 8 * unit + self.partials(s, node, 1 if self.decoder(node) or masked else steps)
            if masked and need[0]:
                # its loop's list of the steps' input gradients, alive with the lists beside their stack
                loop += _size(node.inputs[0].spec)
        elif path is None:
            # Keras 3's ConvLSTM2D: a few unit-sized gradients per iteration in flight, and the
            # weights' partial gradients of four iterations waiting for the accumulation (traced on
            # the LSTMs before their fused step was counted as listed). The tf_keras GRU's and
            # SimpleRNN's traces show such tensors too, but with them the per-step counts above
            # over-predict, so they are left out there (docs/keras.md)
            weights = sum(nbytes(w) for w in s.weights_of(node) if w.trainable)
            partials = s.flavour == "keras3" and cls != "SimpleRNN"
            loop = 8 * unit + (IN_FLIGHT_UNITS * min(PARALLEL_ITERATIONS, steps) * unit
                               + PARTIALS_WAITING * weights if partials else 0)
            if cls == "GRU" and (self.runs_ahead(node) or at_high_end(s)):
                # a GRU's gradient loop may run its iterations' recurrent-kernel partial gradients ahead of
                # their accumulation, as many as iterations are in flight: traced, 34 of a GRU(128)'s over 52
                # steps at the peak (a real user's model, 11.9 MB measured against 6.1 MB without them),
                # 24 of a GRU(1024) stack's over 24 steps (every step's), one to fifteen or none in the oracle's
                # GRUs: the guess where the loop runs ahead (runs_ahead), else the high end
                recurrent = sum(nbytes(w) for w in s.weights_of(node) if w.name.endswith("recurrent_kernel"))
                held = steps if steps <= PARALLEL_ITERATIONS else PARALLEL_ITERATIONS + 2
                loop += held * recurrent // self.cell(node)[2]
        else:
            # each iteration in flight holds the gradient of every slice of a kernel, each the whole
            # kernel's size (StridedSliceGrad; the LSTM's split kernel one concat), until the
            # accumulation, one iteration after the other, takes it: traced, 96 of the GRU's 64 x 192
            # recurrent kernel and 92 of its kernel, 128 of the LSTM's recurrent kernel and 30 of its
            # kernel, at the peak, both flavours. The iterations in flight have popped their steps'
            # tensors from the lists, which go as each iteration ends
            ws = s.weights_of(node)  # a Bidirectional's both directions': forward_kernel, backward_kernel, ...
            recurrent = sum(nbytes(w) for w in ws if w.name.endswith("recurrent_kernel"))
            kernel = sum(nbytes(w) for w in ws if w.name.endswith("kernel")) - recurrent
            kernel_slices = path[1] if path[2] == 0 else 1
            partial = path[1] * recurrent + kernel_slices * kernel
            # TensorFlow's executor runs an op on its own thread's stack (inline) once its cost estimate, which
            # starts at 1e8 cycles and moves a tenth of the way to each run's cost, falls under 8,000 cycles
            # (executor.cc's KernelStats): after INLINE_AFTER_RUNS runs of a cheap op. A loop of that many
            # steps has run its body's ops so often by the measured step that each iteration's accumulation
            # keeps up, and one iteration's slice gradients are left (traced: an implementation-0 LSTM(100)
            # over 200 steps, 4 recurrent-kernel sized blocks at the peak, where one over 29 steps held all
            # 116). With recurrent_dropout they still piled up over 100 steps (measured, two LSTMs: not traced)
            inline = steps >= INLINE_AFTER_RUNS and not float(self.cell(node)[1].get("recurrent_dropout") or 0)
            loop = (partial if inline else min(PARALLEL_ITERATIONS, steps) * max(0, partial - per_step)) + 8 * unit
        loop += self.loop_workspace(s, node)
        dys = [d for d in dys if d is not None]
        if zeros is not None:
            s.one(f"{name} backward loop", [*dys, lists, x, back, zeros], 0, scratch=loop, kind="gradient")
            dx = s.one(f"{name} input gradient (stacked)", [zeros], _size(node.inputs[0].spec), kind="gradient")
            lists = x = None
        else:
            dx = s.one(f"{name} input gradient (backward loop)", [*dys, lists, x, mask], _size(node.inputs[0].spec),
                       scratch=loop, kind="gradient")
        grads = self.grads(s, node, name, [dx])
        dstates = [s.one(f"{name} initial state gradient", [dx], _size(t.spec), kind="gradient") if n else None
                   for t, n in zip(node.inputs[1:], need[1:])]
        s.one(f"{name} gradient done", [lists, x, back, mask] + ([] if need[0] else [dx]), 0)
        return [dx if need[0] else None, *dstates], grads


def _upstream(node, through=lambda made: True):
    """The calls upstream of a node's first input, each once, going on past a call only where
    `through(call)` holds."""
    seen, todo = set(), [node.inputs[0].producer]
    while todo:
        made = todo.pop()
        if made is None or id(made) in seen:
            continue
        seen.add(id(made))
        yield made
        if through(made):
            todo.extend(t.producer for t in made.inputs)


CELL_LAYERS = {"SimpleRNNCell": "SimpleRNN", "LSTMCell": "LSTM", "GRUCell": "GRU"}
# Layers that hand their input's Keras mask on unchanged (supports_masking, one input)
MASK_PASSING = frozenset({"Dropout", "SpatialDropout1D", "GaussianNoise", "GaussianDropout", "Activation",
                          "BatchNormalization", "LayerNormalization", "Dense", "TimeDistributed"})
PARALLEL_ITERATIONS = 32  # tf.while_loop's default, which Keras's rnn loop keeps
FEW_STEPS = 8  # an off-fused LSTM loop this short holds every step's recurrent-kernel partial (Recurrent.partials)
INLINE_AFTER_RUNS = 90  # runs after which a cheap op's estimate, 1e8 cycles less a tenth a run, is under 8,000
IN_FLIGHT_UNITS = 3  # unit-sized gradients per iteration in flight, Keras 3 (Recurrent.backward)
PARTIALS_WAITING = 4  # iterations whose weight gradients wait for the accumulation, Keras 3
# Bytes of the executor's own state per in-flight iteration of a recurrent layer's loop, by the loop's
# step function (its ops' inputs and pending counts), for its forward loop and its gradient loop alike.
# Traced, in blocks of one size per loop, 26 to 32 of them alive at the peak: SimpleRNN 4,904-6,632
# (two stacked SimpleRNNs and a text SimpleRNN, both flavours: at the stacked model's peak four loops'
# blocks, both layers' forward and gradient loops), LSTM 8,120-9,848 (the stock model, both flavours),
# GRU 9,608-10,376 (the tagger in tf_keras, the time-series model in Keras 3).
LOOP_STATE = {"SimpleRNN": 6_000, "LSTM": 9_500, "GRU": 9_500, "ConvLSTM2D": 9_500}
# The same on the cell's own step (recurrent_dropout), whose loop body has many more ops: traced on one
# GRU(64) and one LSTM(64), both flavours, 1.02 to 1.42 MB of such blocks at the peak, forward and
# gradient loops together, 9,700 to 36,900 bytes a block (Recurrent.CELL_STEP)
CELL_LOOP_STATE = 16_000


@rule("TimeDistributed")
class TimeDistributed(Rule):
    """tf_keras: the wrapped layer on the batch and time axes merged (reshapes share memory), so the
    wrapped layer's own rule runs on a node of those merged shapes, its kernels' scratch and what its
    gradient keeps with it (traced: a TimeDistributed Conv2D's Conv2DBackpropFilter im2col buffer,
    201 images' columns, and its MaxPooling2D's gradient at a video CNN-LSTM's peak). Keras 3
    (time_distributed.py, a static time axis): the input transposed time-major, one slice and one call
    of the layer per step, the outputs stacked and transposed back. Each step's input gradient is a
    StridedSliceGrad as large as the whole input, and all of them are added in one AddN (traced:
    a bidirectional-GRU tagger's TimeDistributed(Dense), 50 StridedSliceGrads of its (32, 50, 128)
    input alive at once, 41 MB)."""

    def merged(self, s, node):
        """(rule, node) of the wrapped layer on the batch and time axes merged (tf_keras), made once per
        node and sharing the wrapper's weights; None in Keras 3 or for a layer with no rule."""
        made = s.merged_nodes.get(id(node))
        if made is not None or s.flavour != "tf_keras":
            return made
        config = node.layer.config.get("layer") or {}
        inner = rule_for(config.get("class_name"))
        if inner is None or isinstance(inner, TimeDistributed):
            return None
        from ..graph import Node, Tensor
        from ..layers.base import KerasLayer, Spec

        def merge(t):
            shape = t.spec.shape
            return Tensor(t.name, Spec((shape[0] * shape[1],) + tuple(shape[2:]), t.spec.dtype))

        layer = KerasLayer(config["class_name"], dict(config.get("config") or {}, name=node.layer.name),
                           trainable=node.layer.trainable, policy=node.layer.policy, flavour=s.flavour,
                           path=node.layer.path)
        s._weights[id(layer)] = s._weights.get(id(node.layer), [])
        made = s.merged_nodes[id(node)] = (inner, Node(layer, [merge(t) for t in node.inputs],
                                                      [merge(t) for t in node.outputs], node.path, node.call_index))
        return made

    def grads_late(self, s, node):
        made = self.merged(s, node)
        return made[0].grads_late(s, made[1]) if made is not None else False

    def forward(self, s, node, xs):
        made = self.merged(s, node)
        if made is not None:
            return made[0].forward(s, made[1], xs)
        name = node.layer.name
        x, out = node.inputs[0].spec, node.outputs[0].spec
        if s.flavour == "keras3":
            t = s.one(f"{name} input time-major", [xs[0]], _size(x))
            slices = s.one(f"{name} per-step slices", [t], _size(x))
            stacked = s.one(f"{name} stacked outputs", [slices], _size(out))
            return [s.one(f"{name} output", [stacked], _size(out))], slices
        y = s.one(f"{name} output", [xs[0]], _size(out))
        return [y], xs[0]

    def backward(self, s, node, keep, dys, need):
        made = self.merged(s, node)
        if made is not None:
            return made[0].backward(s, made[1], keep, dys, need)
        name = node.layer.name
        x, out = node.inputs[0].spec, node.outputs[0].spec
        dy = dys[0]
        steps = x.shape[1] if s.flavour == "keras3" and len(x.shape) > 1 else 1
        if steps > 1:
            dy = s.one(f"{name} output gradient time-major", [dys[0]], _size(out), kind="gradient")
        grads = [(w, s.one(f"{name} {w.name} gradient", [keep, dy], nbytes(w), kind="weight gradient"))
                 for w in s.weights_of(node) if w.trainable]
        dx = s.one(f"{name} input gradient", [dy], _size(x), scratch=(steps - 1) * _size(x),
                   kind="gradient") if need[0] else None
        return [dx], grads


@rule("SpectralNormalization")
class SpectralNorm(_Weighted):
    """Keras 3's wrapper (spectral_normalization.py): in training it assigns the kernel kernel / sigma,
    a kernel-sized tensor made after power iterations on two vectors, then calls the wrapped layer.
    The wrapped layer is taken as one op, as TimeDistributed's is: its output, its input kept, the
    weight gradients reading the input and the output's gradient, the input's gradient; its own
    kernels' scratch is not counted."""

    def forward(self, s, node, xs):
        name = node.layer.name
        kernels = [w for w in s.weights_of(node) if w.name.endswith("kernel")]
        if kernels:
            t = s.one(f"{name} kernel / sigma", [], nbytes(kernels[0]), kind="optimizer temporary")
            s.one(f"{name} assign kernel", [t], 0)
        return [s.one(f"{name} output", [xs[0]], _size(node.outputs[0].spec))], xs[0]

    def backward(self, s, node, keep, dys, need):
        name = node.layer.name
        grads = self.grads(s, node, name, [keep, dys[0]])
        dx = s.one(f"{name} input gradient", [dys[0]], _size(node.inputs[0].spec), kind="gradient") if need[0] else None
        return [dx], grads


PROJECTED = ("MultiHeadAttention", "GroupQueryAttention")  # attention layers that project query, key and value


@rule("MultiHeadAttention", "Attention", "AdditiveAttention")
class Attention(_Weighted):
    """MultiHeadAttention: query, key and value projections, the scores (batch x heads x Tq x Tk) and their
    softmax (kept),
    the weighted values and the output projection; each Einsum of two tensors copies both operands
    batch-major for the op's span. MultiHeadAttention's backward pass runs as traced (Keras 3 and
    tf_keras transformer blocks): the output projection's gradients, the scores' gradient and the
    softmax's (written into it), then for query, key and value in turn the einsum gradient of that
    projection followed by the projection's own gradients. Keras 3 on TensorFlow, with no attention
    dropout and 3-D inputs, writes the scale and the softmax into the scores' buffer and projects
    with a matmul whose kernel is broadcast over the batch, so each kernel gradient is first one per
    batch row, then summed. Attention and AdditiveAttention project nothing: Attention's scores are a
    matmul of the inputs themselves (keras.layers.Attention: matmul(query, key, transpose_b=True)),
    AdditiveAttention's a sum over a broadcast (batch, Tq, Tv, dim) tensor (additive_scores)."""

    def fused(self, s, node):
        """Keras 3's dot_product_attention path, with its broadcast matmul projections."""
        return (s.flavour == "keras3" and node.layer.class_name in PROJECTED
                and not node.layer.config.get("dropout") and all(len(t.spec.shape) == 3 for t in node.inputs))

    def heads(self, node):
        """(heads, size of each) of the query's projection."""
        c = node.layer.config
        return int(c.get("num_heads") or 1), int(c.get("key_dim") or node.inputs[0].spec.shape[-1])

    def repeats(self, node):
        """How many query heads share each key and value head."""
        return 1

    def projections(self, s, node, xs, proj, tq, tk):
        """The query, key and value projections (`proj`: the query's bytes per step)."""
        name, kv = node.layer.name, proj // self.repeats(node)
        pq = s.one(f"{name} query", [xs[0]], proj * tq)
        pk = s.one(f"{name} key", xs[2:3] or xs[1:2] or xs[:1], kv * tk)
        pv = s.one(f"{name} value", xs[1:2] or xs[:1], kv * tk)
        return pq, pk, pv

    def ungrouped(self, s, node, part, d):
        """The key's or value's gradient as its projection made it (GroupQueryAttention's repeat)."""
        return d

    def forward(self, s, node, xs):
        name = node.layer.name
        q = node.inputs[0].spec
        kv = node.inputs[1].spec if len(node.inputs) > 1 else q
        c = node.layer.config
        heads, dim = self.heads(node)
        item = _item(q)
        tq, tk = prod(q.shape[1:-1]), prod(kv.shape[1:-1])
        proj = q.shape[0] * heads * dim * item
        scores = q.shape[0] * heads * tq * tk * item
        einsum = proj * (tq + tk)  # its batch-major copies of both operands
        if node.layer.class_name in PROJECTED:
            pq, pk, pv = self.projections(s, node, xs, proj, tq, tk)
        else:  # no projections: the scores are a matmul of the inputs themselves (keras.layers.Attention)
            pq, pv = xs[0], (xs[1:2] or xs[:1])[0]
            pk, einsum = (xs[2:3] or [pv])[0], 0
        tanh = None
        if node.layer.class_name == "AdditiveAttention":
            z, tanh = self.additive_scores(s, node, pq, pk, scores)
        else:
            z = s.one(f"{name} scores", [pq, pk], scores, scratch=einsum)
        probs = s.one(f"{name} softmax", [z], scores, forward=self.fused(s, node))
        mask = dropped = None
        if node.layer.class_name in PROJECTED and float(c.get("dropout") or 0):
            # tf.nn.dropout on the softmax: a uniform draw, its bool mask (kept), the kept scores
            # scaled (kept for the value's gradient; traced: a ViT's `dropout/Mul` and `GreaterEqual`)
            mask = s.one(f"{name} attention dropout mask", [probs], scores // item, scratch=scores)
            dropped = s.one(f"{name} attention dropout", [probs, mask], scores)
        ctx = s.one(f"{name} attention", [dropped or probs, pv], proj * tq, scratch=einsum)
        y = s.one(f"{name} output", [ctx], _size(node.outputs[0].spec))
        return [y], (list(xs), pq, pk, pv, probs, ctx, mask, dropped, tanh)

    def broadcast(self, node):
        """AdditiveAttention's (batch, Tq, Tv, dim) bytes: every query step beside every value step."""
        q = node.inputs[0].spec
        kv = node.inputs[1].spec if len(node.inputs) > 1 else q
        return q.shape[0] * prod(q.shape[1:-1]) * prod(kv.shape[1:-1]) * q.shape[-1] * _item(q)

    def additive_scores(self, s, node, pq, pk, scores):
        """AdditiveAttention's scores, sum(scale * tanh(q[:, :, None] + k[:, None]), -1) (tf_keras's and
        Keras 3's _calculate_scores): the broadcast sum, the tanh written into it and kept for its
        gradient, and the product with the scale (where use_scale), each (batch, Tq, Tv, dim); traced
        in both flavours (an LSTM with additive self-attention, batch 32: 29,491,200-byte `add` and
        `mul` in the forward pass)."""
        name, big = node.layer.name, self.broadcast(node)
        t = s.one(f"{name} tanh(q + k)", [pq, pk], big)
        if node.layer.config.get("use_scale", True):
            return s.one(f"{name} scores", [s.one(f"{name} scale * tanh", [t], big)], scores), t
        return s.one(f"{name} scores", [t], scores), t

    def additive_backward(self, s, node, tanh, dz):
        """The scores' gradient through AdditiveAttention's sum, scale and tanh: dz broadcast back to
        (batch, Tq, Tv, dim) (Tile), the scale's gradient (the product with tanh, summed), dz * scale,
        tanh's gradient into it, then the sums over Tv and Tq for the query and the key (traced: the
        Tile, the tanh and one product alive at the step's peak, both flavours). Returns (the buffer
        both inputs' gradients are summed from, [(Weight, gradient)])."""
        name, big = node.layer.name, self.broadcast(node)
        tile = s.one(f"{name} sum gradient (Tile)", [dz], big, kind="gradient")
        grads = self.grads(s, node, name, [tile, tanh], scratch=big)
        dt = s.one(f"{name} scale * tanh gradient", [tile], big, forward=True, kind="gradient")
        return s.one(f"{name} tanh gradient", [dt, tanh], big, forward=True, kind="gradient"), grads

    def project(self, s, node, part, x, dp, need_input):
        """One projection's gradients: (its input's, where needed, or None; [(Weight, buffer)]), in
        the order the flavour runs them. `x`: the projection's input buffer."""
        name = node.layer.name
        ws = [w for w in s.weights_of(node) if w.trainable and w.name.split("/")[0] == part]
        fused = self.fused(s, node)
        dx = None
        if need_input and fused:
            dx = s.one(f"{name} {part} input gradient", [dp], s.prog.bufs[x].bytes, kind="gradient")
        grads = []
        for w in ws:
            kernel = w.name.endswith("kernel")
            scratch = nbytes(w) * s.batch if kernel and fused else 0
            grads.append((w, s.one(f"{name} {w.name} gradient", [dp, x] if kernel else [dp], nbytes(w),
                                   scratch=scratch, kind="weight gradient")))
        if need_input and not fused:
            dx = s.one(f"{name} {part} input gradient", [dp], s.prog.bufs[x].bytes, kind="gradient")
        return dx, grads

    def backward(self, s, node, keep, dys, need):
        xs, pq, pk, pv, probs, ctx, mask, dropped = keep[:8]
        name = node.layer.name
        if node.layer.class_name not in PROJECTED:
            return self.scores_backward(s, node, keep, dys, need)
        x_q, x_v = xs[0], (xs[1:2] or xs[:1])[0]
        x_k = xs[2] if len(xs) > 2 else x_v
        bufs = s.prog.bufs
        both = bufs[pq].bytes + bufs[pk].bytes  # an einsum's batch-major copies of its operands
        dctx, grads = self.project(s, node, "attention_output", ctx, dys[0], True)
        dprobs = s.one(f"{name} scores gradient", [dctx, pv], bufs[probs].bytes, scratch=both, kind="gradient")
        if mask is not None:
            dprobs = s.one(f"{name} attention dropout gradient", [dprobs, mask], bufs[probs].bytes, forward=True,
                           kind="gradient")
        dz = s.one(f"{name} softmax gradient", [dprobs, probs], bufs[probs].bytes, scratch=bufs[probs].bytes,
                   forward=True, kind="gradient")
        dq = s.one(f"{name} query projection gradient", [dz, pk], bufs[pq].bytes, scratch=both, kind="gradient")
        dxq, g = self.project(s, node, "query", x_q, dq, need[0])
        grads += g
        dk = s.one(f"{name} key projection gradient", [dz, pq], bufs[pk].bytes, scratch=both, kind="gradient")
        dk = self.ungrouped(s, node, "key", dk)
        dxk, g = self.project(s, node, "key", x_k, dk, need[2] if len(need) > 2 else need[-1])
        grads += g
        dv = s.one(f"{name} value projection gradient", [dctx, dropped or probs], bufs[pv].bytes, scratch=both,
                   kind="gradient")
        dv = self.ungrouped(s, node, "value", dv)
        dxv, g = self.project(s, node, "value", x_v, dv, need[1] if len(need) > 1 else need[0])
        grads += g
        if len(xs) > 2:
            return [dxq, dxv, dxk], grads
        if dxk is not None:  # the key is the value: its two gradients added
            dxv = s.one(f"{name} key and value input gradients", [dxv, dxk], bufs[x_v].bytes, forward=True,
                        kind="gradient")
        if len(xs) == 1:
            return [s.one(f"{name} input gradients", [dxq, dxv], bufs[x_q].bytes, forward=True,
                          kind="gradient") if dxq is not None else None], grads
        return [dxq, dxv], grads

    def scores_backward(self, s, node, keep, dys, need):
        """Attention and AdditiveAttention: the scores' and the inputs' gradients, read from the
        softmax and the inputs."""
        xs, pq, pk, pv, probs, ctx = keep[:6]
        tanh = keep[8]
        name = node.layer.name
        dctx = s.one(f"{name} attention gradient", [dys[0]], s.prog.bufs[ctx].bytes, kind="gradient")
        dprobs = s.one(f"{name} softmax gradient", [dctx, pv, probs], s.prog.bufs[probs].bytes, kind="gradient")
        if tanh is not None:
            dsum, grads = self.additive_backward(s, node, tanh, dprobs)
            dq = s.one(f"{name} query gradient", [dsum], s.prog.bufs[pq].bytes, kind="gradient")
            dk = s.one(f"{name} key gradient", [dsum], s.prog.bufs[pk].bytes, kind="gradient")
        else:
            grads = self.grads(s, node, name, [dys[0], ctx, *xs])
            dq = s.one(f"{name} query gradient", [dprobs, pk], s.prog.bufs[pq].bytes, kind="gradient")
            dk = s.one(f"{name} key gradient", [dprobs, pq], s.prog.bufs[pk].bytes, kind="gradient")
        dv = s.one(f"{name} value gradient", [dctx, probs], s.prog.bufs[pv].bytes, kind="gradient")
        out = []
        for k, (t, n) in enumerate(zip(node.inputs, need)):
            out.append(s.one(f"{name} input {k} gradient", [dq, dk, dv], _size(t.spec), kind="gradient") if n else None)
        s.one(f"{name} gradient done", [dq, dk, dv, *xs], 0)
        return out, grads


@rule("GroupQueryAttention")
class GroupQueryAttention(Attention):
    """Keras 3's grouped_query_attention.py: MultiHeadAttention's ops (dot_product_attention where it
    has no dropout and returns no scores, as MultiHeadAttention's), with num_key_value_heads heads
    in the key and value projections, each then repeated to the query's heads (ops.repeat: tf.repeat's
    ExpandDims, Tile, Reshape; a Tile of one repeat returns its input). Tile's gradient (array_grad.py
    _TileGrad) reads only shapes: a Sum of the repeated gradient back to the projection's size. The
    gate (use_gate: a sigmoid projection of the query multiplied into the attention) is not counted."""

    def fused(self, s, node):
        return super().fused(s, node) and len(node.outputs) == 1

    def heads(self, node):
        c = node.layer.config
        return int(c.get("num_query_heads") or 1), int(c.get("head_dim") or 1)

    def repeats(self, node):
        return self.heads(node)[0] // int(node.layer.config.get("num_key_value_heads") or 1)

    def projections(self, s, node, xs, proj, tq, tk):
        name, repeats = node.layer.name, self.repeats(node)
        if node.layer.config.get("use_gate"):
            s.undercounted.append((name, "its gate (use_gate): a sigmoid projection of the query, kept"))
        pq, pk, pv = super().projections(s, node, xs, proj, tq, tk)
        if repeats > 1:
            pk = s.one(f"{name} key repeated (Tile)", [pk], proj * tk)
            pv = s.one(f"{name} value repeated (Tile)", [pv], proj * tk)
        return pq, pk, pv

    def ungrouped(self, s, node, part, d):
        repeats = self.repeats(node)
        if repeats == 1:
            return d
        return s.one(f"{node.layer.name} {part} repeat gradient (Sum)", [d], s.prog.bufs[d].bytes // repeats,
                     kind="gradient")


@rule("LocallyConnected1D", "LocallyConnected2D")
class LocallyConnected(_Weighted):
    """tf_keras's three implementations. 1: the input is sliced once per output position (a strided
    slice each), the slices concatenated, a batched matmul with the kernel; the gradient of each slice
    is a StridedSliceGrad as large as the whole input, and all of them are added in one AddN, so the
    backward pass holds (output positions) x (input bytes) at once. 2: a masked dense kernel
    (positions x kernel x positions x filters), read and masked each step. 3: a sparse matmul."""

    def impl(self, node):
        return int(node.layer.config.get("implementation") or 1)

    @staticmethod
    def sparse_matmul(s, sparse_rows, sparse_cols, dense, out):
        """SparseMatMul's scratch with the masked kernel as its sparse operand (sparse_rows x
        sparse_cols as multiplied) and `dense` (a Spec, batch first) as the other, beside the op's
        transposed copy of `dense`. The op has only a CPU kernel: beside a GPU it runs on the host,
        and its scratch is the host's memory."""
        if s.device != "cpu":
            return 0
        return kernels.sparse_matmul(sparse_rows, sparse_cols, sparse_cols, dense.shape[0], _item(out)) + _size(dense)

    def positions(self, node):
        out = node.outputs[0].spec
        last = node.layer.config.get("data_format", "channels_last") != "channels_first"
        return prod(out.shape[1:-1] if last else out.shape[2:])

    def forward(self, s, node, xs):
        name = node.layer.name
        x, out = node.inputs[0].spec, node.outputs[0].spec
        impl = self.impl(node)
        if impl == 1:
            feature = sum(nbytes(w) for w in s.weights_of(node) if w.name == "kernel") // max(
                self.positions(node), 1) // max(out.shape[-1], 1)
            agg = s.one(f"{name} slices concatenated", [xs[0]], self.positions(node) * x.shape[0] * feature)
            y = s.one(f"{name} batch matmul", [agg], _size(out))
            return [y], (xs[0], agg)
        if impl == 2:
            kernel = sum(nbytes(w) for w in s.weights_of(node) if w.name == "kernel")
            masked = s.one(f"{name} kernel * mask", [], kernel)
            # SparseMatMul(x, masked kernel, b_is_sparse): the kernel is multiplied transposed, as the
            # sparse operand, with a transposed copy of x
            scratch = self.sparse_matmul(s, prod(out.shape[1:]), prod(x.shape[1:]), x, out)
            y = s.one(f"{name} sparse matmul", [xs[0], masked], _size(out), scratch=scratch)
            return [y], (xs[0], masked)
        y = s.one(f"{name} sparse matmul", [xs[0]], _size(out))
        return [y], (xs[0], None)

    def backward(self, s, node, keep, dys, need):
        x, extra = keep
        name = node.layer.name
        impl = self.impl(node)
        size = _size(node.inputs[0].spec)
        grads = self.grads(s, node, name, [dys[0], extra if extra is not None else x])
        if impl == 2 and extra is not None:
            s.one(f"{name} kernel gradient * mask", [extra], 0)
            # the weights' gradients and updates run before the input gradient (traced: tf_keras,
            # seed 000's model at F=500), which is a SparseMatMul of the output gradient and the
            # masked kernel, that kernel the sparse operand again, beside a transposed copy of dy
            s.update_now(node, grads)
        dx = None
        if need[0]:
            if impl == 1:
                dagg = s.one(f"{name} slices gradient", [dys[0], extra], s.prog.bufs[extra].bytes, kind="gradient")
                parts = [s.one(f"{name} StridedSliceGrad", [dagg], size, kind="gradient")
                         for _ in range(self.positions(node))]
                dx = s.one(f"{name} AddN of the slices' gradients", parts, size, kind="gradient")
            elif impl == 2:
                x_spec, out = node.inputs[0].spec, node.outputs[0].spec
                scratch = self.sparse_matmul(s, prod(x_spec.shape[1:]), prod(out.shape[1:]), out, out)
                dx = s.one(f"{name} input gradient", [dys[0], extra], size, scratch=scratch, kind="gradient")
            else:
                dx = s.one(f"{name} input gradient", [dys[0]], size, kind="gradient")
        s.one(f"{name} gradient done", [x, extra], 0)
        return [dx], grads


@rule("Pipeline")
class Pipeline(Reshaping):
    """Keras 3's Pipeline: each inner layer makes a new tensor from the last one's, freed once the
    next is made; the input gradient (where needed) is one op, as for the PREPROCESSING layers. A
    Pipeline holding any other layer, or a trainable weight, is refused: the gradients of its inner
    layers are not laid out."""

    def forward(self, s, node, xs):
        other = node.layer.not_preprocessing()
        if other is not None or any(w.trainable for w in s.weights_of(node)):
            why = f"its layer {other.name!r} ({other.class_name})" if other is not None else "a trainable weight"
            raise InputError(f"a Pipeline's training step is modelled only for preprocessing and augmentation "
                             f"layers without trainable weights; it holds {why}", layer=node.path)
        y = xs[0]
        for inner, _, outs in node.layer.calls([t.spec for t in node.inputs]):
            y = s.one(f"{node.layer.name} {inner.class_name}", [y], _size(outs[0]))
        return [y], None


@rule("MelSpectrogram")
class MelSpectrogram(Rule):
    """Its call() on TensorFlow (the stft of keras/src/backend/tensorflow/math.py): a reflect Pad of
    fft_length // 2 each side, frames fft_length long, the window multiplied in, an RFFT (complex64),
    the squared real and imaginary parts added, the root and the power, a Tensordot with the mel
    matrix, the decibel scaling in place, and the swap of the last two axes. It sits where no
    gradient reaches (before every trainable weight); after one it is refused."""

    def forward(self, s, node, xs):
        if any(s.need):
            raise InputError("a MelSpectrogram after a trainable weight: its gradient (through an RFFT) is "
                             "not modelled", layer=node.path)
        x, out = node.inputs[0].spec, node.outputs[0].spec
        item = 8 if "float64" in (x.dtype, node.layer.compute_dtype) else 4
        fft = node.layer.get("fft_length", 2048)
        rows, frames = prod(x.shape[:-1]), out.shape[-1]
        bins = rows * frames * (fft // 2 + 1) * item
        name = node.layer.name
        y = s.one(f"{name} Pad", [xs[0]], rows * (x.shape[-1] + 2 * (fft // 2)) * item)
        y = s.one(f"{name} frames", [y], rows * frames * fft * item)
        y = s.one(f"{name} window", [y], rows * frames * fft * item, forward=True)
        y = s.one(f"{name} RFFT", [y], 2 * bins)
        re, im = s.one(f"{name} Real", [y], bins), s.one(f"{name} Imag", [y], bins)
        y = s.one(f"{name} magnitude", [s.one(f"{name} Square", [re], bins, forward=True),
                                        s.one(f"{name} Square", [im], bins, forward=True)], bins, forward=True)
        y = s.one(f"{name} mel Tensordot", [y], rows * frames * out.shape[-2] * item)
        y = s.one(f"{name} Transpose", [y], rows * frames * out.shape[-2] * item)
        if _item(out) != item:
            y = s.one(f"{name} Cast", [y], _size(out))
        return [y], None


@rule("STFTSpectrogram")
class STFTSpectrogram(_Weighted):
    """Its call(): for each DFT kernel a Conv2D (ops.conv) of the channels taken as images (channels
    last: transposed first), its output (images, frames, frequencies) transposed to frequencies
    first (channels last), then the mode's element-wise ops and a last transpose unless channels
    first without expand_dims (a reshape). Gradients, where its kernels are trainable (Keras's
    default) or an input needs one: each element-wise op's reads what TensorFlow's registered one
    reads (Square its input, Sqrt its output, Maximum and Atan2 their inputs), then per kernel
    Conv2DBackpropFilter (reads the transposed input) and Conv2DBackpropInput, with their CPU scratch."""

    def parts(self, node):
        """(channels last?, whether the last reshape is a transpose, output bytes, one kernel's conv bytes)."""
        layer, out = node.layer, node.outputs[0].spec
        last = layer.channels_last()
        conv = _size(out) // (2 if layer.get("mode", "log") == "stft" else 1)
        return last, last or layer.get("expand_dims", False), _size(out), conv

    def forward(self, s, node, xs):
        name, mode = node.layer.name, node.layer.get("mode", "log")
        last, transposed, size, conv = self.parts(node)
        x = s.one(f"{name} Transpose", [xs[0]], _size(node.inputs[0].spec)) if last else xs[0]
        convs = []
        for kernel in node.layer.kernels():
            c = s.one(f"{name} {kernel} Conv2D", [x], conv)
            convs.append(s.one(f"{name} {kernel} Transpose", [c], conv) if last else c)
        keep = {"x": x, "convs": convs}
        if mode in ("real", "imag"):
            y = convs[0]
        elif mode == "angle":
            y = s.one(f"{name} Atan2", convs, size)
        elif mode == "stft":
            y = s.one(f"{name} ConcatV2", convs, size)
        else:
            squares = [s.one(f"{name} Square", [c], conv) for c in convs]
            y = s.one(f"{name} power", squares, conv, forward=True)
            if mode == "psd":
                y = s.one(f"{name} power + Pad(Slice(power))", [y], conv)
            else:
                keep["power"] = y
                y = keep["root"] = s.one(f"{name} Sqrt(Maximum)", [y], conv)
        if transposed:
            y = s.one(f"{name} Transpose", [y], size)
        if mode == "log":
            keep["linear"] = y
            y = s.one(f"{name} Log(Maximum)", [y], size)
        return [y], keep

    def backward(self, s, node, keep, dys, need):
        name, mode = node.layer.name, node.layer.get("mode", "log")
        last, transposed, size, conv = self.parts(node)
        g = dys[0]
        if mode == "log":
            g = s.one(f"{name} Log and Maximum gradient", [g, keep["linear"]], size, kind="gradient")
        if transposed:
            g = s.one(f"{name} Transpose gradient", [g], size, kind="gradient")
        if mode in ("real", "imag"):
            gs = [g]
        elif mode in ("angle", "stft"):
            gs = s.op(f"{name} {'Atan2' if mode == 'angle' else 'ConcatV2'} gradient",
                      [g, *keep["convs"]] if mode == "angle" else [g], [(conv, "gradient")] * 2)
        else:
            if mode != "psd":
                g = s.one(f"{name} Sqrt and Maximum gradient", [g, keep["root"], keep["power"]], conv,
                          kind="gradient")
            else:
                g = s.one(f"{name} Pad and Slice gradient", [g], conv, kind="gradient")
            gs = [s.one(f"{name} Square gradient", [g, c], conv, kind="gradient") for c in keep["convs"]]
        x_size = _size(node.inputs[0].spec)
        images, frames, freqs, taps = self.conv_dims(node)
        item = _item(node.outputs[0].spec)
        weights = {w.name: w for w in s.weights_of(node)}
        grads, dxs = [], []
        for kernel, gk in zip(node.layer.kernels(), gs):
            if last:
                gk = s.one(f"{name} {kernel} Transpose gradient", [gk], conv, kind="gradient")
            if weights[kernel].trainable:
                scratch = 0 if s.device != "cpu" else (kernels.conv_backprop_filter(frames, taps, freqs, item)
                                                       + kernels.contraction_temporary(nbytes(weights[kernel])))
                grads += self.grads(s, node, f"{name} {kernel}", [keep["x"], gk], scratch=scratch, only={kernel})
            if need[0]:
                scratch = 0 if s.device != "cpu" else kernels.conv_backprop_input(images, frames, taps, freqs, item,
                                                                                  s.threads)
                dxs.append(s.one(f"{name} {kernel} Conv2DBackpropInput", [gk], x_size, scratch=scratch,
                                 kind="gradient"))
        if not dxs:
            return [None], grads
        dx = dxs[0] if len(dxs) == 1 else s.one(f"{name} AddN", dxs, x_size, forward=True, kind="gradient")
        if last:
            dx = s.one(f"{name} Transpose gradient", [dx], x_size, kind="gradient")
        return [dx], grads

    @staticmethod
    def conv_dims(node):
        """(images: batch x channels, frames, frequencies, filter taps) of one kernel's Conv2D."""
        x, layer = node.inputs[0].spec, node.layer
        channels = x.shape[-1] if layer.channels_last() else x.shape[1]
        frame, _, fft = layer.lengths()
        out = node.outputs[0].spec.shape
        frames = out[1] if layer.channels_last() else out[2]
        return x.shape[0] * channels, frames, fft // 2 + 1, frame
