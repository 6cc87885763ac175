"""Real Caffe on the same net, for bench.py's side-by-side row: build it and run it once forward
and once backward, in CPU mode, through pycaffe.

    CAFFE_PYTHON/python bench/pycaffe_run.py NET.prototxt    # with pycaffe on PYTHONPATH

bench.py runs it with the interpreter of a Caffe build's venv (see bench.py, PYCAFFE) in a new
process, as protoaudit runs, and times the whole process.
"""
import sys


def main(path):
    import caffe

    caffe.set_mode_cpu()
    net = caffe.Net(path, caffe.TRAIN)
    net.forward()
    net.backward()


if __name__ == "__main__":
    main(sys.argv[1])
