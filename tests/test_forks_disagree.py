"""A file several forks read and size differently, which every one of them stops on alike.

smichalowski/google_inception_v3_for_caffe's train_val.prototxt (30d38d3, copied to
tests/data/forks_disagree/) is for NVIDIA/caffe 0.15 (its README); protoaudit ships no NVIDIA Caffe,
and tongcheng's and happynear's caffe.proto both read its BatchNorm fields (scale_filler, bias_filler)
with BatchNorm code of their own. But the file has two TRAIN-phase Data layers that both make 'data'
(lines 2 and 44: the ImageNet LMDB and a DIGITS job's), and Net::AppendTop stops on the second in any
Caffe: "Top blob 'data' produced by multiple sources." (BVLC/caffe 9b89154 src/caffe/net.cpp:377-378).
So the refusal names that stop, at line 44, not the choice of fork, which cannot help.
"""
import json
import os

from conftest import DATA, run_in_process

NET = os.path.join(DATA, "forks_disagree", "inception_v3_train_val.prototxt")


def test_a_stop_every_fork_makes_is_the_refusal():
    r = run_in_process(os.path.basename(NET), cwd=os.path.dirname(NET))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert ":44: layer 'data': top blob 'data' is produced by multiple sources" in r.stderr
    assert "tongcheng, happynear" in r.stderr and "--fork" in r.stderr


def test_with_the_wiring_fixed_the_first_fork_that_builds_it_is_taken_and_said(tmp_path):
    """Without the DIGITS job's two Data layers (the file's third and fourth layers), each fork builds
    the net, with its own BatchNorm (and NVIDIA Caffe 0.15's its own Data): the file is read with the
    first of them (tongcheng's), said as an assumption naming the layers they size differently and the
    others' --fork."""
    lines = open(NET).read().split("\n")
    start = 44 - 1  # the third layer's `layer {` (line 44)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("layer {"))
    end = next(i for i in range(end + 1, len(lines)) if lines[i].startswith("layer {"))
    path = tmp_path / "train_val.prototxt"
    path.write_text("\n".join(lines[:start] + lines[end:]))
    r = run_in_process(path, "--format", "json")
    assert r.returncode == 0, r.stderr
    (entry,) = [a for a in json.loads(r.stdout)["assumptions"] if "more than one Caffe fork" in a["assumption"]]
    said = entry["assumption"]
    assert "the first of tongcheng, happynear, nvcaffe that builds it" in said, said
    assert "sizes layers 'data', 'conv_batchnorm'" in said
    assert "--fork happynear or --fork nvcaffe" in json.dumps(entry)
