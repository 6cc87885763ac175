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


# MatMul on the CPU (tensorflow/core/kernels/matmul_op_impl.h) is an Eigen tensor contraction. Before
# multiplying it packs a block of each operand into one heap buffer: mc x kc and kc x nc elements, each
# rounded up to 64 bytes (TensorContractionBlockMemAllocator), plus 64 bytes of alignment, held while
# the op runs. The block sizes come from Eigen's blocking heuristic (Eigen/src/Core/products/
# GeneralBlockPanelKernel.h, evaluateProductBlockingSizesHeuristic) on the machine's per-core caches,
# refined by TensorFlow for its own float kernels (xla/tsl/framework/contraction/
# eigen_contraction_kernel.h, TensorContractionBlocking<float>). The caches are those of the machine
# TensorFlow was measured on (32 KiB L1, 512 KiB L2, and an L3); the rule, with its 16 x 4 register
# block, matches 85 traced MatMul shapes and 8 Conv2D forward passes (the same contraction of image
# patches by the filter) to the byte (tests/data/keras_oracle/matmul/).
MACHINE_L1, MACHINE_L2 = 32 << 10, 512 << 10
_MR, _NR = 16, 4


def _eigen_blocking(k, m, n):
    """Eigen's (kc, mc, nc) for a one-thread product of an m x k by a k x n matrix (float)."""
    if max(k, m, n) < 48:
        return k, m, n
    peel, k_div, k_sub = 8, (_MR + _NR) * 4, _MR * _NR * 4
    max_kc = max(((MACHINE_L1 - k_sub) // k_div) & ~(peel - 1), 1)
    old_k = k
    if k > max_kc:
        k = max_kc if k % max_kc == 0 else max_kc - peel * ((max_kc - 1 - k % max_kc) // (peel * (k // max_kc + 1)))
    actual_l2 = 1572864
    remaining_l1 = MACHINE_L1 - k_sub - m * k * 4
    max_nc = remaining_l1 // (k * 4) if remaining_l1 >= _NR * 4 * k else (3 * actual_l2) // (4 * max_kc * 4)
    nc = min(actual_l2 // (2 * k * 4), max_nc) & ~(_NR - 1)
    if n > nc:
        n = nc if n % nc == 0 else nc - _NR * ((nc - n % nc) // (_NR * (n // nc + 1)))
    elif old_k == k:
        problem, lm, max_mc = k * n * 4, actual_l2, m
        if problem <= 1024:
            lm = MACHINE_L1
        elif problem <= 32768:
            lm, max_mc = MACHINE_L2, min(576, m)  # (Eigen's branch for a machine with an L3)
        mc = min(lm // (3 * k * 4), max_mc)
        if mc > _MR:
            mc -= mc % _MR
        elif mc == 0:
            return k, m, n
        m = mc if m % mc == 0 else mc - _MR * ((mc - m % mc) // (_MR * (m // mc + 1)))
    return k, m, n


# Each packed block pair goes to oneDNN's sgemm (TensorFlow's custom contraction kernel for Eigen),
# which takes a workspace of its own for the call and frees it on return: 74,176 bytes whatever the
# shape, traced on an AVX-512 CPU (tests/data/keras_oracle/matmul/workspace.tsv; Conv2D's gradients
# take it too). A product that packs nothing calls no sgemm. Another instruction set may size it
# otherwise.
GEMM_WORKSPACE = 74176


def gemm_workspace(itemsize):
    """sgemm's workspace for a contraction of `itemsize`-byte elements that packs (float32 only is
    refined, as for the packed blocks)."""
    return GEMM_WORKSPACE if itemsize == 4 else 0


def contraction(rows, inner, cols, itemsize, transposed=False):
    """What a MatMul (or Conv2D's contraction) holds while it runs besides its output: its packed
    blocks and, where it packs, sgemm's workspace."""
    blocks = matmul(rows, inner, cols, itemsize, transposed)
    return blocks + gemm_workspace(itemsize) if min(rows, inner, cols) > 1 else blocks


def matmul(rows, inner, cols, itemsize, transposed=False, vector_path=True):
    """Bytes MatMul holds besides its output for a rows x inner by inner x cols product on the CPU.
    A product with a dimension of 1 packs nothing: above 16,384 multiply-adds Eigen evaluates it
    into a temporary of the output's size plus 64 bytes, below that into the output (traced on 23
    such shapes), and straight into the output whenever an operand is `transposed` (as both of
    MatMul's gradients multiply: 7 shapes traced each way). The packed blocks do not depend on it.
    Without the `vector_path` (the contractions of Eigen's 3-D convolutions) such a product packs
    its blocks as any other. Only float32 is refined as above; other types are not counted."""
    if rows * inner * cols == 0 or itemsize != 4:
        return 0
    if min(rows, inner, cols) == 1 and vector_path:
        return rows * cols * itemsize + 64 if rows * inner * cols > 16384 and not transposed else 0
    # row-major tensors: Eigen multiplies the transposed product, so its m is the output's columns
    k, m, n = inner, cols, rows
    kc, mc, nc = _eigen_blocking(k, m, n)
    mc = min(m, -(-int(mc * 1.5) // 48) * 48)
    nc = min(n, -(-nc // 24) * 24)
    slices = max(1, -(-k // kc))
    kc = min(k, -(-(k // slices) // 8) * 8)
    return _aligned(mc * kc * itemsize) + _aligned(kc * nc * itemsize) + 64


# Conv3D and its gradients on the CPU (tensorflow/core/kernels/conv_ops_3d.cc, conv_grad_ops_3d.cc;
# traced on 5 shapes: tests/data/keras_oracle/matmul/conv3d.tsv). The forward pass is Eigen's cuboid
# convolution: a contraction of the volume patches with the filter, packed as a MatMul of (batch x
# output voxels) by (kernel volume x input channels) by (filters). Each gradient's default kernel
# ("custom") sizes an im2col buffer of `shard` volumes from the L3 cache that Eigen reports (256 MiB
# on the measuring machine, whose kernel reports 32 MiB: inferred from the traced buffer of three
# 16x112x112 volumes' columns), and falls back on Eigen's cuboid backward convolutions when that
# buffer exceeds 25 times (kMaxTempAllocationOverhead) the elements of the input, filter and output
# gradient together.
EIGEN_L3 = 256 << 20
MAX_TEMP_OVERHEAD = 25


def _cuboid_shard(out_voxels, filter_total, out_depth, itemsize):
    """Volumes per im2col buffer: the L3 working set over one volume's matmul (rounded up)."""
    work = out_voxels * filter_total + out_voxels * out_depth + filter_total * out_depth
    return -(-(EIGEN_L3 // itemsize) // work)


def cuboid_forward(out_voxels, filter_total, out_depth, itemsize):
    """Conv3D's packed blocks (`out_voxels`: the batch's)."""
    return matmul(out_voxels, filter_total, out_depth, itemsize, vector_path=False)


def cuboid_backprop_input(batch, out_voxels, filter_total, out_depth, in_depth, elements, itemsize):
    """Conv3DBackpropInputV2 for one volume's `out_voxels` (`elements`: of the input, filter and output
    gradient). A batch of one runs a parallel contraction into an im2col buffer of one volume; a larger
    one shards volumes as the filter gradient does, and its Eigen matrix product's own blocks are not
    counted. Falling back, Eigen reverses the filter into a temporary (its size plus 64 bytes) and packs
    (batch x voxels) by (kernel volume x filters) by (input channels), output voxels standing for the
    input's (exact for "same" padding at stride 1)."""
    shard = 1 if batch == 1 else _cuboid_shard(out_voxels, filter_total, out_depth, itemsize)
    col = shard * out_voxels * filter_total
    x, w, dy = elements
    if col // (x + w + dy) > MAX_TEMP_OVERHEAD:
        kernel = filter_total // max(in_depth, 1)
        return w * itemsize + 64 + matmul(batch * out_voxels, kernel * out_depth, in_depth, itemsize,
                                          vector_path=False)
    pack = matmul(out_voxels, out_depth, filter_total, itemsize, vector_path=False) if batch == 1 else 0
    return col * itemsize + pack


def cuboid_backprop_filter(batch, out_voxels, filter_total, out_depth, elements, itemsize):
    """Conv3DBackpropFilterV2 for one volume's `out_voxels` (`elements`: of the input, filter and output
    gradient): an im2col buffer of `shard` volumes whatever the batch, the contraction's temporary of
    the filter gradient's size plus 64 bytes, and its packed blocks; falling back, Eigen shuffles the
    input and the output gradient into temporaries of their sizes and evaluates the filter gradient
    into one of its size (each plus 64 bytes) before its packed blocks (to the byte on the largest
    fallback traced, within 12 KB on the smaller ones)."""
    shard = _cuboid_shard(out_voxels, filter_total, out_depth, itemsize)
    col = shard * out_voxels * filter_total
    x, w, dy = elements
    if col // (x + w + dy) > MAX_TEMP_OVERHEAD:
        return ((x + dy + w) * itemsize + 3 * 64
                + matmul(filter_total, batch * out_voxels, out_depth, itemsize, vector_path=False))
    return (col * itemsize + w * itemsize + 64
            + matmul(filter_total, min(shard, batch) * out_voxels, out_depth, itemsize, vector_path=False))


def _aligned(nbytes):
    """A packed block's bytes rounded up to 64 (TensorContractionBlockMemAllocator)."""
    return -(-nbytes // 64) * 64


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
