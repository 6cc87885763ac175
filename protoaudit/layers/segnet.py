"""caffe-segnet's own layers (BN, Upsample, DenseImageData)."""
