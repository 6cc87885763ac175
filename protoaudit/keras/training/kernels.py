"""Scratch that TensorFlow's CPU kernels allocate while they run (bytes), from TensorFlow's source.

Only kernels whose scratch can matter are here; every other kernel's scratch is taken as zero.
"""
import math

# Conv2DCustomBackpropFilterOp and Conv2DCustomBackpropInputOp (tensorflow/core/kernels/
# conv_grad_filter_ops.cc, conv_grad_input_ops.h), the default CPU kernels of Conv2DBackpropFilter
# and Conv2DBackpropInput: an im2col buffer of `shard_size` images, where shard_size fills a 30 MiB
# working set ("L3 cache size") with whole images' matmuls, whatever the batch.
WORKING_SET = (30 << 20)
L2_CACHE = 256 << 10


def conv_backprop_filter(out_image, filter_total, out_depth, itemsize):
    """Bytes of Conv2DBackpropFilter's col_buffer: shard_size x out_image x filter_total."""
    work = out_image * filter_total + out_image * out_depth + filter_total * out_depth
    if work == 0:
        return 0
    shard = math.ceil((WORKING_SET // itemsize) / work)
    return shard * out_image * filter_total * itemsize


def contraction_temporary(filter_bytes):
    """Conv2DBackpropFilter adds `col x out_grad` into the filter gradient through an Eigen contraction
    that evaluates into a temporary of the filter gradient's size plus 64 bytes, on the heap beside
    col_buffer (traced on TensorFlow 2.21: 9,437,248 bytes for a 3x3x512x512 filter)."""
    return filter_bytes + 64


def conv_backprop_input(batch, out_image, filter_total, out_depth, itemsize, threads=1):
    """Bytes of Conv2DBackpropInput's col_buffer: one image when the batch is 1 or a thread's share
    of one image's matmuls exceeds the L2 cache (parallel contraction), else shard_size images."""
    work = out_image * out_depth + filter_total * out_depth + out_image * filter_total
    if work == 0:
        return 0
    parallel = batch == 1 or work // threads >= L2_CACHE // itemsize
    shard = 1 if parallel else math.ceil((WORKING_SET // itemsize) / work)
    return shard * out_image * filter_total * itemsize


def max_pool_argmax(out_elements):
    """MaxPoolingGradOp (tensorflow/core/kernels/maxpooling_op.cc) on the CPU: an int64 argmax of the
    pooled output's size. (Its copy of the pooled output is a buffer of the step's own: it takes the
    pooled output's memory where MaxPoolGrad reads that last, forward_input_or_allocate_temp({1}).)"""
    return out_elements * 8


# SparseMatMul (tensorflow/core/kernels/sparse_matmul_op.cc), the op of tf.compat.v1.sparse_matmul
# (tf_keras's LocallyConnected implementation 2): the sparse operand is cut into slices of M rows by
# KL columns, and each slice reserves room for every one of its elements whether zero or not (data3:
# one float each; index3: 4 bytes per 3; data and index: 2 per row and 64-column block, 4 + 2
# bytes); the dense operand is copied into a buffer of KR x NR in 128-column pieces.
_M, _K, _N = 64, 64, 128


def sparse_matmul(sparse_rows, sparse_cols, dense_rows, dense_cols, itemsize=4, threads=1):
    """Bytes SparseMatMul holds while it runs, besides its output: the sparse operand's slices and
    the dense operand's buffer, for a sparse operand of sparse_rows x sparse_cols (as multiplied,
    after any transpose) and a dense one of dense_rows x dense_cols (the op's own transposed copy
    of the dense operand is the caller's to count)."""
    mem = max(1, (threads + 1) // 2) * 128 * 1024  # ComputeBlockSizes: 128K floats of "right" per core
    kr = min(dense_rows, mem // 256)
    nr = dense_cols
    if kr * nr > mem:
        kr = min(kr, 4096)
    kr = max(1, kr // _K) * _K
    nr = max(1, nr // 256) * 256
    if kr * nr > mem:
        nr = mem // kr
    nr = max(1, nr // 256) * 256
    kl = 1024
    while kl > _K:
        if kr % kl == 0 and max(1, sparse_rows // 64) * (sparse_cols // kl) > max(1, (threads + 1) // 2):
            break
        kl //= 2
    total = 0
    for r in range(0, sparse_rows, _M):
        rows = min(_M, sparse_rows - r)
        for c in range(0, sparse_cols, kl):
            cols = min(kl, sparse_cols - c)
            blocks = -(-cols // _K)
            size = rows * cols
            total += size * itemsize + size // 3 * 4 + blocks * 4 * 2 + blocks * rows * 2 * (itemsize + 2)
    buffer = min(kr, dense_rows) * -(-min(nr, dense_cols) // _N) * _N * itemsize
    return total + buffer
