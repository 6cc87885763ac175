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


def max_pool_grad(out_elements, itemsize):
    """MaxPoolingGradOp (tensorflow/core/kernels/maxpooling_op.cc) on the CPU: a copy of the pooled
    output (unless forwarded) and an int64 argmax of the output's size."""
    return out_elements * (itemsize + 8)
