"""Trace the heap blocks of Conv3D and its two gradients on TensorFlow's CPU device (conv3d.tsv).

usage: TF_ENABLE_ONEDNN_OPTS=0 OMP_NUM_THREADS=1 LD_PRELOAD=memtrack_log.so \
       python trace_conv3d.py N,D,H,W,C,K,F,PADDING... 2> log
(memtrack_log.so: the oracle kit's heap interposer, as for trace_matmul.py). Each op runs once to
build its graph, then once traced between @OP and @END, blocks of 4,096 bytes or more.
"""
import ctypes
import os
import sys

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import tensorflow as tf  # noqa: E402
lib = ctypes.CDLL(None)
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
for spec in sys.argv[1:]:
    n, d, h, w, c, k, f, pad = spec.split(",")
    n, d, h, w, c, k, f = map(int, (n, d, h, w, c, k, f))
    x = tf.ones((n, d, h, w, c)); filt = tf.ones((k, k, k, c, f))
    y = tf.nn.conv3d(x, filt, [1, 1, 1, 1, 1], pad)
    dy = tf.ones(y.shape)
    @tf.function
    def grads(x, filt, dy):
        a = tf.raw_ops.Conv3DBackpropFilterV2(input=x, filter_sizes=tf.constant([k, k, k, c, f]), out_backprop=dy, strides=[1,1,1,1,1], padding=pad)
        return a
    @tf.function
    def grads_in(x, filt, dy):
        return tf.raw_ops.Conv3DBackpropInputV2(input_sizes=tf.constant([n, d, h, w, c]), filter=filt, out_backprop=dy, strides=[1,1,1,1,1], padding=pad)
    @tf.function
    def fwd(x, filt):
        return tf.nn.conv3d(x, filt, [1, 1, 1, 1, 1], pad)
    for name, fn, args in (("filter", grads, (x, filt, dy)), ("input", grads_in, (x, filt, dy)), ("forward", fwd, (x, filt))):
        fn(*args)
        sys.stderr.write(f"@OP {name} {spec} x={x.shape.num_elements()*4} dy={dy.shape.num_elements()*4}\n"); sys.stderr.flush()
        lib.memtrack_log(1, 4096)
        fn(*args)
        lib.memtrack_log(0, 0)
        sys.stderr.write("@END\n"); sys.stderr.flush()
