"""Deploy nets beside a train net: the input shapes they declare, for a data source whose dataset
is not on this machine. A repository keeps `deploy.prototxt` (an input of 1x3x224x224) beside the
`train_val.prototxt` whose LMDB it does not ship; the deploy net's channels, height and width are
the ones the net was built for."""
import os
import re

from ..errors import InputError

MAX_FILES = 8  # prototxt files looked at in one folder
MAX_BYTES = 2 << 20  # a deploy net's text (a ResNet-152's is 0.2 MB); a larger file is passed over


def inputs_beside(path, param, tops):
    """{top: (shape, file)} of the net inputs declared by the deploy nets of the net `param` (read
    from `path`) in its folder, those named `*deploy*` first, by the length of the start their name
    shares with the net's; the first file to declare a top wins.
    A deploy net is one whose layers are this net's (_same_net): a folder of unrelated nets gives
    none of its inputs to another. Only files whose text names every top of `tops` and half of the
    net's layers are parsed (a folder of a hundred nets costs a read of each, not a parse)."""
    from .netspecs import net_specs

    folder = os.path.dirname(os.path.abspath(path))
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".prototxt"))
    except OSError:
        return {}
    own = os.path.basename(path)
    # deploy nets first, the one whose name shares most with the net's first (VDSR_net.prototxt's is
    # VDSR_net_deploy.prototxt, wherever it sorts among the folder's other deploy nets)
    names = sorted(names, key=lambda n: ("deploy" not in n.lower(), -len(os.path.commonprefix([n, own]))))[:MAX_FILES]
    found = {}
    for name in names:
        other = os.path.join(folder, name)
        if other == os.path.abspath(path):
            continue
        try:
            if not os.path.isfile(other) or os.path.getsize(other) > MAX_BYTES:
                continue
            with open(other, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if not _may_be_its_deploy(text, tops, param):
                continue
            specs = net_specs(other)
        except (InputError, OSError):
            continue
        if len(specs) != 1 or specs[0].role != "net" or not _same_net(specs[0].param, param):
            continue
        for top, shape in _declared(specs[0].param).items():
            found.setdefault(top, (shape, name))
    return found


def _may_be_its_deploy(text, tops, train):
    """A read of a net's text before it is parsed: it names every top of `tops` and half of the
    train net's layers (a deploy version names nearly all of them; an unrelated net few)."""
    quoted = set(_QUOTED.findall(text))
    names = {layer.name for layer in train.layer}
    return tops <= quoted and len(names & quoted) >= len(names) / 2


_QUOTED = re.compile(r"[\"']([^\"'\n]+)[\"']")


def _same_net(deploy, train):
    """Whether `deploy` is a deploy version of `train`: nine in ten of its layers (past its inputs)
    are train's, by name and type, and so is every layer that reads one of its inputs."""
    ours = {(layer.name, layer.type) for layer in train.layer}
    theirs = [layer for layer in deploy.layer if layer.type != "Input"]
    inputs = set(deploy.input) | {top for layer in deploy.layer if layer.type == "Input" for top in layer.top}
    if not theirs or sum((layer.name, layer.type) in ours for layer in theirs) < 0.9 * len(theirs):
        return False
    return all((layer.name, layer.type) in ours for layer in theirs if inputs & set(layer.bottom))


def _declared(net):
    """{top: shape} of a net's inputs (V2, upgraded): legacy `input` with `input_shape` or
    `input_dim`, and the tops of its Input layers (one shape per top, or one for all); and the data
    top of a dataset layer that crops to crop_size (a train net beside a test net that does not):
    0 for the batch, and for the channels unless mean_value gives one per channel."""
    out = {}
    for layer in net.layer:
        crop = layer.transform_param.crop_size if not layer.bottom and layer.HasField("transform_param") else 0
        if crop and layer.top:
            values = len(layer.transform_param.mean_value)
            out[layer.top[0]] = (0, values if values > 1 else 0, crop, crop)
    for k, top in enumerate(net.input):
        if k < len(net.input_shape):
            out[top] = tuple(net.input_shape[k].dim)
        elif len(net.input_dim) >= 4 * (k + 1):
            out[top] = tuple(net.input_dim[4 * k:4 * k + 4])
    for layer in net.layer:
        if layer.type == "Input" and layer.input_param.shape:
            shapes = layer.input_param.shape
            for k, top in enumerate(layer.top):
                out[top] = tuple(shapes[k if len(shapes) > 1 else 0].dim)
    return out


def fill(known, declared):
    """A needed top's shape: its known dimensions (the batch the data layer gives), the rest from
    a declared one of the same rank (0 where it is not declared); None where they do not fit."""
    if not known:
        return tuple(declared) if all(d > 0 for d in declared) else None
    if len(known) != len(declared) or not all(k is not None or d > 0 for k, d in zip(known, declared)):
        return None
    return tuple(k if k is not None else d for k, d in zip(known, declared))
