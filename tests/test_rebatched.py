"""The largest-batch search and --sweep audit the train net again at another batch from the built
net (protoaudit.net.build.rebatched: Net::Init's filtering, splits and wiring kept; each layer made
again, reshaped and given its parameters). What they find must be what building the net from its
file at that batch finds (Net::Init run again from the start, as Caffe does for a new prototxt):
every blob's shape, every parameter, every buffer and the total, for every net of the corpus and
the samples that audits with no flags."""
import os
import sys

import pytest

from conftest import CORPUS_AND_SAMPLES, audited
from protoaudit.audit import reaudit
from protoaudit.errors import InputError
from protoaudit.net import build as build_module


def _train_view(audit):
    """What the train net holds at its batch: blob shapes, parameters, buffers, and the total."""
    net_audit = audit.train
    net = net_audit.net
    return (net.batch, [(b.name, b.shape) for b in net.blobs],
            [[(p.shape, p.owner, p.need_backward) for p in node.params] for node in net.layers],
            sorted((b.net, b.layer, b.owner, b.kind, b.elements, b.itemsize, b.touch, b.per_sample, b.device)
                   for b in net_audit.buffers),
            audit.total_bytes)


@pytest.mark.parametrize("path", CORPUS_AND_SAMPLES, ids=os.path.basename)
def test_a_net_made_again_at_another_batch_is_the_net_built_at_it(path, monkeypatch):
    first = audited(path)
    if first is None or first.batch is None or first.train is None:
        pytest.skip("refused with no flags, or no batch to change")
    made = []
    real = build_module.rebatched

    def counting(net, batch):
        made.append(batch)
        return real(net, batch)

    monkeypatch.setattr(sys.modules["protoaudit.audit"], "rebatched", counting)  # (the package's `audit` is the function)
    for batch in (1, first.batch + 3):
        if batch == first.batch:
            continue
        built = audited(path, batch=batch)
        try:
            again = reaudit(first, batch=batch)
        except InputError:
            assert built is None, "the net made again refuses a batch its file builds at"
            continue
        assert built is not None, "the net made again takes a batch its file refuses"
        # reaudit leaves the Net's C++ objects out in GPU mode (host memory: not counted against the card)
        built_view = _train_view(built)
        built_view = built_view[:3] + ([b for b in built_view[3] if b[2] != "C++ objects"], built_view[4])
        assert _train_view(again) == built_view
    if not first.train.net.inputs:  # a net with legacy inputs is built from its file at once
        assert made, "the net was built from its file without being made again from the built one"
