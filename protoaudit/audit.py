"""The public entry point: `audit(path, **options)` builds every net a file stands for."""
from dataclasses import dataclass, field

from .errors import InputError
from .net import build
from .nets import net_specs
from .options import INT_MAX, parse_batch


@dataclass
class Audit:
    """What protoaudit found for one file: the nets Caffe would build, in Caffe's order."""

    path: str
    nets: list = field(default_factory=list)


def build_nets(path, *, phase=None, stages=(), level=None, inputs=None, batch=None, schema=None):
    """Every net the file stands for (one for a net file, train then tests for a solver), built."""
    phase = phase.upper() if phase else None
    if phase not in (None, "TRAIN", "TEST"):
        raise InputError(f"--phase {phase.lower()}: the phase is train or test")
    batch = parse_batch(batch)
    nets = []
    for spec in net_specs(path, phase=phase, stages=stages, level=level, schema=schema):
        net = build(spec.param, spec.state, inputs=inputs, batch=batch, schema=spec.schema.name,
                    lines=spec.lines, path=spec.path)
        net.role = spec.role
        net.solver = spec.solver
        _check_sizes(net)
        nets.append(net)
    return nets


def _check_sizes(net):
    for layer in net.layers:
        for index in layer.tops:
            blob = net.blobs[index]
            if blob.count > INT_MAX:
                raise InputError(
                    f"top '{blob.name}' would hold {blob.count:,} elements {blob.shape}; a Caffe blob holds "
                    f"at most {INT_MAX:,}",
                    file=net.path, line=layer.line, layer=layer.name,
                    fix="use a smaller batch or input size",
                )


def audit(path, **options):
    """Build the nets of `path` (a net or solver prototxt); see the CLI for the options."""
    return Audit(path, build_nets(path, **options))
