"""The largest-batch search reads the rule from two sums of an audit (protoaudit.memory.scaling.split:
the bytes on the card that do not grow with the batch, and those that do) and confirms a batch
with them. protoaudit.audit.split_at gives those sums at a batch without making the audit there
(no Buffer is made: the net made again at that batch is walked for its bytes). They must be the
sums of the audit it stands for, reaudit's at that batch (every buffer made, the solver's state
added as _assess adds it), on every corpus net and sample that audits with no flags; where
split_at cannot tell, it says so (None) and the search audits instead."""
import os

import pytest

from conftest import CORPUS_AND_SAMPLES, DATA, audited
from protoaudit.audit import _named_apart, _rebatched, reaudit, split_at
from protoaudit.errors import InputError
from protoaudit.memory import scaling


def _sums(audit):
    return scaling.split(scaling.parts(audit))


@pytest.mark.parametrize("path", CORPUS_AND_SAMPLES, ids=os.path.basename)
def test_the_sums_at_a_batch_are_those_of_the_audit_there(path):
    first = audited(path)
    if first is None or first.batch is None or first.train is None:
        pytest.skip("refused with no flags, or no batch to change")
    if not _named_apart(first.train.net):  # (Caffe's MNIST autoencoder has two layers named 'loss')
        assert split_at(first, first.batch) is None and split_at(first, 1) is None
        return
    assert split_at(first, first.batch) == _sums(first)
    for batch in (1, first.batch + 3, 2 * first.batch + 1):
        if batch == first.batch:
            continue
        sums = split_at(first, batch)
        try:
            again = reaudit(first, batch=batch)
        except InputError:
            assert sums is None, "sums at a batch Caffe refuses"
            continue
        if sums is None:  # only where the net is not made again from the built one (built from its file)
            assert _rebatched([first.train.net], batch, first.again[0]) is None
        else:
            assert sums == _sums(again)


def test_in_cpu_mode_the_search_audits():
    """Host memory counts against the budget there, and the walk without Buffers counts the card's."""
    path = os.path.join(DATA, "corpus", "nets", "cifar10_quick_train_test.prototxt")
    audit = audited(path, mode="cpu", inputs={"data": (100, 3, 32, 32)})
    assert audit is not None and split_at(audit, audit.batch + 1) is None
