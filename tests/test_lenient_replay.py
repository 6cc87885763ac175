"""Reading past unknown fields through the token replay: the same message and the same fields read
past, at the same lines, as protobuf's own parser told to skip unknown fields; and the checks that
spare a file no schema reads the passes that could not read it."""
import os
import re

import pytest
from google.protobuf import text_format

from protoaudit.read import load, tokens
from protoaudit.read.schema import SCHEMA_NAMES, differing_names, load_schema

NETS = os.path.join(os.path.dirname(__file__), "data", "corpus", "nets")


def _protobuf_skipping(text, message):
    """protobuf's parser told to skip unknown fields, noting the top ones as the replay does."""
    skipped = []

    class Noting(text_format._Parser):
        inside = 0

        def _SkipFieldContents(self, tokenizer, name, holder):
            if not self.inside:
                skipped.append((name, holder.split(".")[-1], tokenizer._previous_line + 1))
            self.inside += 1
            try:
                super()._SkipFieldContents(tokenizer, name, holder)
            finally:
                self.inside -= 1

    Noting(allow_unknown_field=True).ParseLines(text.split("\n"), message)
    return skipped


def _with_unknown_fields(text):
    """Every ReLU layer given a field no schema has, and every convolution_param another: the layers
    alike (a net's repeated blocks) each have their own."""
    text = re.sub(r'(type:\s*"ReLU")', r'\1 relu_flavour: "fast"', text)
    return re.sub(r"(convolution_param\s*\{)", r"\1 winograd { tile: 4 }", text)


@pytest.mark.parametrize("name", ["bvlc_googlenet_train_val.prototxt", "cifar_resnet20_trainval.prototxt",
                                  "segnet_basic_train.prototxt"])
def test_replay_reads_past_unknown_fields_as_protobuf_does(name):
    with open(os.path.join(NETS, name)) as f:
        text = _with_unknown_fields(f.read())
    net = load_schema("bvlc").NetParameter
    theirs_message, mine_message = net(), net()
    theirs = _protobuf_skipping(text, theirs_message)
    mine = tokens.parse_skipping(tokens.Text(text), mine_message)
    assert mine == theirs
    assert mine_message.SerializeToString() == theirs_message.SerializeToString()
    relus = len(re.findall(r'type:\s*"ReLU"', text))
    assert sum(1 for field, _, _ in mine if field == "relu_flavour") == relus > 1


def test_replay_raises_where_protobuf_does():
    text = 'layer { name: "a" type: "ReLU" bottom: "x" top: "a" bogus { deep: 1 }\nlayer { name: "b" top: }'
    net = load_schema("bvlc").NetParameter
    with pytest.raises(text_format.ParseError) as theirs:
        _protobuf_skipping(text, net())
    with pytest.raises(text_format.ParseError) as mine:
        tokens.parse_skipping(tokens.Text(text), net())
    assert (str(mine.value), mine.value.GetLine()) == (str(theirs.value), theirs.value.GetLine())


def test_unbalanced_brackets_read_by_no_schema():
    assert tokens.Text('layer { name: "a" }').balanced
    for text in ('layer { name: "a" ', 'layer { name: "a" } }', "state < phase: TEST", 'top: ["a"'):
        assert not tokens.Text(text).balanced


def test_a_fork_reads_otherwise_only_through_a_name_it_defines_otherwise():
    # shufflenet's caffe.proto is BVLC's plus shuffle_channel_param (its ShuffleChannel layer's)
    names, numbers = differing_names("shufflenet")
    assert "shuffle_channel_param" in names and "convolution_param" not in names
    plain = tokens.Text('layer { name: "c" type: "Convolution" convolution_param { num_output: 8 } }')
    assert not load._reads_otherwise(plain, "shufflenet")
    assert load._reads_otherwise(tokens.Text('layer { shuffle_channel_param { group: 3 } }'), "shufflenet")
    # DeconvNet's V1 enum has BN (a value BVLC's lacks): named, or given by its number
    bn = load_schema("deconvnet").pool.FindEnumTypeByName("caffe.V1LayerParameter.LayerType").values_by_name["BN"]
    assert "BN" in differing_names("deconvnet")[0]
    assert load._reads_otherwise(tokens.Text(f"layers {{ type: {bn.number} }}"), "deconvnet")
    assert {name for name in SCHEMA_NAMES[1:] if not differing_names(name)[0]} == set()


def test_a_fork_is_tried_where_bvlc_fails_only_for_a_name_it_accepts_and_bvlc_does_not():
    """caffe-segnet's ConvolutionParameter has `optional uint32 kernel_size` where BVLC's has it
    repeated: a text reads otherwise with the two (twice in one block), but no text BVLC's strict
    reading refuses can segnet's read for it. Its own bn_param is a name it accepts; SolverParameter's
    `type` (a string only BVLC's has) is not."""
    segnet, bvlc = load_schema("segnet"), load_schema("bvlc")
    mine = segnet.pool.FindMessageTypeByName("caffe.ConvolutionParameter").fields_by_name["kernel_size"]
    theirs = bvlc.pool.FindMessageTypeByName("caffe.ConvolutionParameter").fields_by_name["kernel_size"]
    assert theirs.is_repeated and not mine.is_repeated and mine.type == theirs.type
    assert not segnet.pool.FindMessageTypeByName("caffe.SolverParameter").fields_by_name.get("type")
    names, accepted = differing_names("segnet")[0], differing_names("segnet", accepted_only=True)[0]
    assert {"kernel_size", "type", "bn_param"} <= names
    assert "bn_param" in accepted and not {"kernel_size", "type"} & accepted
    conv = tokens.Text('layer { type: "Convolution" convolution_param { kernel_size: 3 kernel_size: 5 } }')
    assert load._reads_otherwise(conv, "segnet") and not load._reads_otherwise(conv, "segnet", accepted_only=True)
