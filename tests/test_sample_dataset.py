"""The README's dataset sample: samples/make_dataset.py writes the datasets samples/lenet_lmdb.prototxt
reads, and protoaudit sizes LeNet's data tops from them (MNIST's 1x28x28 records, batches 64 and 100)."""
import os
import subprocess
import sys

from conftest import ROOT, run_protoaudit


def test_the_sample_net_reads_the_sample_dataset(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    made = subprocess.run([sys.executable, os.path.join(ROOT, "samples", "make_dataset.py"),
                           str(tmp_path / "samples" / "data")], capture_output=True, text=True, env=env, timeout=60)
    assert made.returncode == 0, made.stderr
    # run from a folder without the datasets: the working directory is tried before --root, and a
    # checkout where the README's recipe wrote samples/data/ must not answer from there
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = run_protoaudit(os.path.join(ROOT, "samples", "lenet_lmdb.prototxt"), "--root", tmp_path, "--mode", "cpu",
                         cwd=elsewhere)
    assert run.returncode == 0, run.stderr
    assert ("layer 'mnist', top 'data' 64x1x28x28: dataset samples/data/mnist_train_lmdb (from "
            f"{tmp_path}, --root) (first record: 1x28x28, raw)") in run.stdout
    assert "top 'data' 100x1x28x28: dataset samples/data/mnist_test_lmdb" in run.stdout
    assert "Assumed" not in run.stdout
