"""A train_val file's TEST net runs beside its TRAIN net at the TEST batch the file states, even when
--input gives the data's shape (which Caffe reads from the dataset), unless --test-batch says otherwise."""
import os

from protoaudit.audit import audit

from conftest import DATA

ALEXNET = os.path.join(DATA, "corpus", "nets", "bvlc_alexnet_train_val.prototxt")  # batch 256 / 50


def batches(result):
    return {n.role: n.batch for n in result.nets}


def test_test_net_keeps_the_files_batch_with_input():
    result = audit(ALEXNET, inputs={"data": (256, 3, 227, 227)}, context=0)
    assert batches(result) == {"train": 256, "test": 50}
    test = next(n for n in result.nets if n.role == "test")
    assert list(test.net.layer("data").top_shapes) == [(50, 3, 227, 227), (50,)]


def test_batch_moves_the_train_net_and_test_batch_the_test_net():
    result = audit(ALEXNET, inputs={"data": (256, 3, 227, 227)}, batch=64, test_batch=10, context=0)
    assert batches(result) == {"train": 64, "test": 10}
    train = next(n for n in result.nets if n.role == "train")
    assert list(train.net.layer("data").top_shapes) == [(64, 3, 227, 227), (64,)]
