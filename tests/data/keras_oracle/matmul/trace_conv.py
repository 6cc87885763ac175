"""Trace the heap blocks of one Conv2D per shape on TensorFlow's CPU device (how conv_scratch.tsv was
made). Arguments: NxHxCxKxOxSxP (batch, square image side, input channels, square kernel side,
filters, stride, padding s=SAME v=VALID); the command and the log format are trace_matmul.py's.
"""
import ctypes
import os
import sys

lib = ctypes.CDLL(None)
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
@tf.function
def f(x, w, s, p):
    return tf.nn.conv2d(x, w, s, p)
for spec in sys.argv[1:]:
    n, h, c, k, o, s, p = spec.split('x'); n, h, c, k, o, s = map(int, (n, h, c, k, o, s))
    pad = 'SAME' if p == 's' else 'VALID'
    x = tf.ones((n, h, h, c)); w = tf.ones((k, k, c, o))
    f(x, w, s, pad)
    sys.stderr.write(f"@OP {spec}\n"); sys.stderr.flush(); lib.memtrack_log(1, 64)
    f(x, w, s, pad)
    lib.memtrack_log(0, 0); sys.stderr.write("@END\n"); sys.stderr.flush()
