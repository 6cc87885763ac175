"""Which layers of a net are alike: made the same way, so they touch the same buffers and hold the
same C++ objects. A net repeats its layers over and over (a ResNet's blocks, a generated net's
thousands), and what one of them touches (protoaudit.memory.buffers) or holds on the host
(protoaudit.memory.host) serves every layer alike."""


def made_from(node):
    """What a layer is made from, as a key, or None for a data source (its touches and objects may
    come from its tops' names and the files it reads): its class, its context (one per net), its
    LayerParameter less its name and its blobs' names (which no layer reads to size anything), its
    shapes, in-place tops, backward flags and loss weights. Kept on the node (with its touches)."""
    kept = node.touches_kept
    if kept is None:
        kept = node.touches_kept = {}
    key = kept.get("made from", False)
    if key is False:
        key = kept["made from"] = _made_from(node)
    return key


def _made_from(node):
    impl = node.impl
    if impl.data_source:
        return None
    lp = node.lp
    config = type(lp)()
    config.CopyFrom(lp)
    for name in ("name", "bottom", "top"):
        config.ClearField(name)
    return (type(impl), id(impl.ctx), config.SerializeToString(), tuple(node.bottom_shapes), tuple(node.top_shapes),
            tuple(node.in_place), tuple(node.bottom_need_backward), node.need_backward,
            tuple([p.need_backward for p in node.params]), tuple(node.loss_weights))
