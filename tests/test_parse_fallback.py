"""protoaudit.read.tokens replays protobuf's tokens through protobuf's own parser (private
internals), and falls back to text_format.Parse where an internal is missing or behaves otherwise.
Both ways must read every file to the same message, with the same schema chosen, and refuse every
bad file with the same line. Expected values come from text_format.Parse itself (the public API)."""
import glob
import os

import pytest
from google.protobuf import text_format

from conftest import DATA, ROOT
from protoaudit.errors import InputError
from protoaudit.read import load, tokens

NETS = sorted(glob.glob(os.path.join(DATA, "corpus", "nets", "*.prototxt"))
              + glob.glob(os.path.join(ROOT, "samples", "*.prototxt"))
              + glob.glob(os.path.join(DATA, "solvers", "**", "*.prototxt"), recursive=True))

# faults of every kind protobuf reports: an unknown field, a value of the wrong type, an unknown
# enum value, a missing brace, an unterminated string, a field out of range, a stray brace, a V1
# type no schema knows, a field only a fork has (read by that fork), a template left unfilled
BAD = {
    "unknown_field.prototxt": 'name: "n"\nlayer {\n  name: "a"\n  type: "ReLU"\n  bogus: 1\n}\n',
    "wrong_type.prototxt": 'layer { name: "c" type: "Convolution"\n  convolution_param { num_output: "x" } }\n',
    "bad_enum.prototxt": 'layer { name: "p" type: "Pooling"\n pooling_param { pool: MEDIAN } }\n',
    "unclosed.prototxt": 'layer {\n  name: "a"\n  type: "ReLU"\n',
    "unterminated.prototxt": 'name: "net\nlayer { name: "a" }\n',
    "out_of_range.prototxt": 'layer { name: "c" convolution_param {\n kernel_size: -3 } }\n',
    "stray_brace.prototxt": 'name: "n"\n}\nlayer { name: "a" }\n',
    "v1_unknown.prototxt": 'layers { name: "x" type: NO_SUCH_TYPE }\n',
    "fork_field.prototxt": 'layer { name: "u" type: "Upsample" bottom: "a" top: "b"\n upsample_param { scale: 2 } }\n',
    "template.prototxt": 'layer { name: "fc" type: "InnerProduct"\n inner_product_param { num_output: ${N} } }\n',
}


def read(path, replay):
    """load.load(path) with the replay on or off, from a clean cache: (kind, schema, message bytes)
    or the refusal's one line."""
    load.READINGS.clear()
    on = tokens.replay_works
    tokens.replay_works = (lambda: True) if replay else (lambda: False)
    try:
        src = load.load(path)
        return src.kind, src.schema.name, src.message.SerializeToString()
    except InputError as e:
        return str(e)
    finally:
        tokens.replay_works = on
        load.READINGS.clear()


def test_the_replay_is_held_to_text_format_parse():
    """Where the replay is used, it read the probe as text_format.Parse did; where it is not, the
    fallback is text_format.Parse itself."""
    net = tokens.PROBE
    if tokens.replay_works():
        text = tokens.Text(net)
        schema = load.load_schema("bvlc")
        assert (tokens.parse(text, schema.NetParameter()) == text_format.Parse(net, schema.NetParameter()))


@pytest.mark.parametrize("path", NETS, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_net_reads_the_same_both_ways(path):
    if not tokens.replay_works():
        pytest.skip("this protobuf's internals differ: every file is read with text_format.Parse")
    assert read(path, True) == read(path, False)


@pytest.mark.parametrize("name", sorted(BAD))
def test_every_fault_is_refused_with_the_same_line_both_ways(name, tmp_path):
    path = tmp_path / name
    path.write_text(BAD[name])
    fallback = read(str(path), False)
    if name == "fork_field.prototxt":  # a one-bottom Upsample with upsample_param: MobileNet-YOLO's Caffe
        assert fallback[:2] == ("net", "mobilenet_yolo")
    else:
        assert isinstance(fallback, str) and f"{name}:" in fallback, fallback
    if tokens.replay_works():
        assert read(str(path), True) == fallback


def test_the_fallback_is_chosen_when_an_internal_is_missing(monkeypatch):
    monkeypatch.setattr(tokens, "_Parser", None)
    tokens.replay_works.cache_clear()
    try:
        assert tokens.replay_works() is False
        schema = load.load_schema("bvlc")
        text = tokens.Text(tokens.PROBE)
        assert tokens.parse(text, schema.NetParameter()) == text_format.Parse(tokens.PROBE, schema.NetParameter())
    finally:
        tokens.replay_works.cache_clear()


def test_the_fallback_is_chosen_when_the_replay_reads_otherwise(monkeypatch):
    """A replay that lost a token (as it would if the Tokenizer's state were kept otherwise) is
    caught on the probe, and text_format.Parse reads every file instead."""
    if tokens._Replay is None:
        pytest.skip("no replay with this protobuf")
    original = tokens._Replay.NextToken

    def skipping(self):
        original(self)
        if self.token == "lr_mult":
            original(self)

    monkeypatch.setattr(tokens._Replay, "NextToken", skipping)
    tokens.replay_works.cache_clear()
    try:
        assert tokens.replay_works() is False
    finally:
        tokens.replay_works.cache_clear()


# Layer blocks read alike (tokens._AlikeBlocks): texts whose blocks are the same but for their own
# names, and each way such a block must not be taken for another (an escape, strings joined, a
# name in a nested block, a list of bottoms or tops beside plain ones, an unterminated name, a
# fault after copies, separators after copies, V1 blocks). Expected: text_format.Parse's message, or its fault and place.
ALIKE = {
    "names": 'layer { name: "a" type: "ReLU" bottom: "x" top: "a" }\n'
             'layer { name: "b" type: "ReLU" bottom: "a" top: "b" }\n'
             "layer { name: 'c' type: \"ReLU\" bottom: 'b' top: 'c' }\n",
    "escaped": 'layer { name: "a\\tb" type: "ReLU" top: "a" }\nlayer { name: "c\\td" type: "ReLU" top: "b" }\n',
    "joined": 'layer { name: "a" "x" type: "ReLU" top: "a" }\nlayer { name: "b" "x" type: "ReLU" top: "b" }\n',
    "nested": 'layer { name: "a" param { name: "w1" } top: "a" }\nlayer { name: "b" param { name: "w2" } top: "b" }\n',
    "list": 'layer { name: "a" bottom: ["x", "y"] top: "a" }\nlayer { name: "b" bottom: ["p", "q"] top: "b" }\n',
    "mixed": 'layer { name: "a" bottom: "x" bottom: ["y"] }\nlayer { name: "b" bottom: "p" bottom: ["y"] }\n',
    "nested_only": 'layer { name: "a\\tb" param { name: "w1" } }\nlayer { name: "a\\tb" param { name: "w2" } }\n',
    "mixed_top": 'layer { name: "a" top: "x" top: ["y"] }\nlayer { name: "b" top: "p" top: ["y"] }\n',
    "separators": 'layer { name: "a" top: "a" };\nlayer { name: "b" top: "b" };\nlayer { name: "c" top: "c" },\n'
                  'layer { name: "d" top: "d" }\nname: "n"\n',
    "fault_after": 'layer { name: "a" top: "a" }\nlayer { name: "b" top: "b" }\n\n  layer { name: "c" top: "c" bogus: 1 }\n',
    "twice_named": 'layer { name: "a" top: "a" }\nlayer { name: "a" name: "b" top: "b" }\n',
    "after_copy": 'layer { name: "a" top: "a" }\nlayer { name: "b" top: "b" }\nlayer { name: "c" top: "c" } }\n',
    "unclosed": 'layer { name: "a" top: "a" }\nlayer { name: "b" top: "b"\n',
    "v1": 'layers { name: "a" type: RELU bottom: "x" top: "a" }\nlayers { name: "b" type: RELU bottom: "a" top: "b" }\n',
    "unterminated": 'layer { name: "a" top: "a" }\nlayer { name: "b\n top: "b" }\n',
}


def _parsed(parse, text):
    schema = load.load_schema("bvlc")
    try:
        return parse(text, schema.NetParameter()).SerializeToString()
    except text_format.ParseError as e:
        return str(e), e.GetLine(), e.GetColumn()


@pytest.mark.parametrize("name", sorted(ALIKE))
def test_alike_layer_blocks_read_as_text_format_parse_reads_them(name):
    """Through the replay itself, whether or not the probe let it serve (a replay that misreads is
    a failure here, not only a fallback)."""
    if tokens._Parser is None:
        pytest.skip("no replay with this protobuf")
    text = ALIKE[name]
    replayed = _parsed(lambda t, m: tokens._Parser().parse(tokens._Replay(tokens.Text(t)), m), text)
    assert replayed == _parsed(text_format.Parse, text)


def test_alike_layer_blocks_are_read_once():
    """The parser reads the first of each kind of block; the rest are copies (its _MergeField is
    called on a `layer` token once per block it reads)."""
    if tokens._Parser is None:
        pytest.skip("no replay with this protobuf")
    calls = []
    parser = tokens._Parser()
    merge = parser._MergeField
    parser._MergeField = lambda tokenizer, message: calls.append(tokenizer.token) or merge(tokenizer, message)
    text = ALIKE["names"] + 'layer { name: "d" type: "Sigmoid" bottom: "c" top: "d" }\n' + ALIKE["names"]
    net = parser.parse(tokens._Replay(tokens.Text(text)), load.load_schema("bvlc").NetParameter())
    assert [layer.name for layer in net.layer] == ["a", "b", "c", "d", "a", "b", "c"]
    assert [layer.type for layer in net.layer] == ["ReLU"] * 3 + ["Sigmoid"] + ["ReLU"] * 3
    assert [list(layer.bottom) for layer in net.layer] == [["x"], ["a"], ["b"], ["c"], ["x"], ["a"], ["b"]]
    assert calls.count("layer") == 2


@pytest.mark.parametrize("path", NETS, ids=lambda p: os.path.relpath(p, ROOT))
def test_layer_lines_are_the_outlines(path):
    """A net's layer lines are taken from where the parser met its layer blocks; they must be the
    lines the outline of the file's blocks gives (a solver's always come from the outline)."""
    load.READINGS.clear()
    try:
        src = load.load(path)
    except InputError:
        pytest.skip("refused")
    assert src.layer_lines == load.layer_lines(load.outline(tokens.Text(load.read_text(path))))


@pytest.mark.parametrize("text", ['layer { name: "a" }\r\nlayer { name: "b" }\rlayer { name: "c" }\n',
                                  'layer { name: "a" }\r\n\r\nlayer { name: "b" }\r\n  layer { name: "c" }\r\n',
                                  'layer { name: "a" }\r\n\x0blayer { name: "b" }\n\u2028layer { name: "c" }\n',
                                  'name: "n"\nlayers { name: "a" type: RELU }\n\nlayers: { name: "b" type: RELU }\n',
                                  'layer { name: "a" }\nlayer <\n name: "b" >\n  layer { name: "c" }',
                                  'layers { name: "a" type: RELU }\nlayer { name: "b" }\nlayers { name: "c" }\n'])
def test_layer_lines_across_line_breaks_and_brackets(text, tmp_path):
    """Other line breaks than "\\n" (the outline's lines, str.splitlines), both brackets and a
    colon, and V1 `layers` beside V2 `layer` blocks (Caffe's upgrade builds the net from the V1 ones)."""
    path = tmp_path / "net.prototxt"
    path.write_bytes(text.encode())
    load.READINGS.clear()
    assert load.load(str(path)).layer_lines == load.layer_lines(load.outline(tokens.Text(text)))
