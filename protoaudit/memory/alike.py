"""Which layers of a net are alike: made the same way, so they touch the same buffers and hold the
same C++ objects. A net repeats its layers over and over (a ResNet's blocks, a generated net's
thousands), and what one of them touches (protoaudit.memory.buffers) or holds on the host
(protoaudit.memory.host) serves every layer alike."""


def alike(net):
    """A number for each layer of `net`, the same for layers made alike: the same class, context
    (one per net), LayerParameter less its name and its blobs' names (its form: which no layer reads
    to size anything), shapes, in-place tops, backward flags and loss weights. A data source is alike no
    other (its touches and objects may come from its tops' names and the files it reads). Kept on
    the net until forget(net)."""
    kept = net.__dict__.get("_alike")
    if kept is None:
        numbers = {}
        kept = net._alike = [numbers.setdefault(_made_from(node), len(numbers)) for node in net.layers]
    return kept


def forget(net):
    net.__dict__.pop("_alike", None)


def _made_from(node):
    impl = node.impl
    if impl.data_source:
        return node.index  # (every other layer's is a tuple)
    return (type(impl), id(impl.ctx), node.form, tuple(node.bottom_shapes), tuple(node.top_shapes),
            tuple(node.in_place), tuple(node.bottom_need_backward), node.need_backward,
            tuple([p.propagates for p in node.params]), tuple(node.loss_weights))
