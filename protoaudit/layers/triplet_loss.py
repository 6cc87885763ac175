"""wujiyang's Triplet-Loss Caffe (wujiyang/Triplet-Loss 7963e0b): caffe-video_triplet's Norm, RankHardLoss
and ImageData pair_size ported to a 2017 BVLC Caffe, for face recognition, as its sources shape them.

The repository ships the changed files only, to drop into BVLC Caffe: its caffe.proto (BVLC's with
flip_param, center_loss_param, rank_hard_loss_param and pair_size added; no Flip or CenterLoss
source), image_data_layer.cpp/.hpp (BVLC's, but ShuffleImages shuffles blocks of pair_size images,
cpp:107-135, pair_size read at :118; the tops are BVLC's, cpp:75-99), norm_layer and
rank_hard_loss_layer. So its data layers and every other layer are BVLC's. File and line references
are to that commit's files.
"""
from . import video_triplet
from .base import carry, register

FORK = "triplet_loss"


carry(__name__, FORK, video_triplet.Norm)
# Norm is a NeuronLayer here (norm_layer.hpp:16), but overrides Reshape (cpp:27-32) and has the same
# CHECKs (cpp:21-22) and CPU code (cpp:37-138, cu:11-21): caffe-video_triplet's Norm.


@register("RankHardLoss", fork=FORK)
class RankHardLoss(video_triplet.RankHardLoss):
    """caffe-video_triplet's RankHardLossLayer with its parameters in rank_hard_loss_param: the same
    Reshape (cpp:31-39), host-only forward and backward (cpp:146-180, 183-251, cu:8-18). Its header
    (rank_hard_loss_layer.hpp:19-49) does not override AllowForceBackward, so LossLayer's keeps the
    gradient out of the labels."""

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1
