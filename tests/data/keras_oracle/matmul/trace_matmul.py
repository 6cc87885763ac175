"""Trace the heap blocks of one MatMul per shape on TensorFlow's CPU device (how scratch.tsv was made).

usage: TF_ENABLE_ONEDNN_OPTS=0 OMP_NUM_THREADS=1 LD_PRELOAD=memtrack_log.so \
       python trace_matmul.py MxKxN... 2> log
       (TA=1 and TB=1 in the environment multiply with transpose_a and transpose_b, the operands made
       K x M and N x K so that the product is still M x K by K x N: transposed.tsv)
memtrack_log.so is the oracle kit's heap interposer (kit/memtrack.c) with its logging switch:
memtrack_log(1, MIN_BYTES) prints "@MT + ptr size live" for each block of MIN_BYTES or more until
memtrack_log(0, 0). Each product runs once to build its graph, then once traced between @OP and @END.
"""
import ctypes
import os
import sys

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import tensorflow as tf  # noqa: E402

lib = ctypes.CDLL(None)
TA, TB = os.environ.get("TA") == "1", os.environ.get("TB") == "1"
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)


@tf.function
def product(a, b):
    return tf.linalg.matmul(a, b, transpose_a=TA, transpose_b=TB)


for m, k, n in (tuple(map(int, s.split("x"))) for s in sys.argv[1:]):
    a, b = tf.ones((k, m) if TA else (m, k)), tf.ones((n, k) if TB else (k, n))
    product(a, b)
    sys.stderr.write(f"@OP {m} {k} {n}\n")
    sys.stderr.flush()
    lib.memtrack_log(1, 64)
    product(a, b)
    lib.memtrack_log(0, 0)
    sys.stderr.write("@END\n")
    sys.stderr.flush()
