"""caffe-pro (yihui-he/caffe-pro a4f0a87, the Caffe yihui-he/channel-pruning pins as its submodule caffe),
as its sources shape its layers.

The fork is BVLC Caffe of September 2017 (ea455eb) with a few changes for channel pruning. Its base
data layers, BaseConvolutionLayer's shapes and ConvolutionLayer's CPU code are BVLC 9b89154's, so
the rest of a net is counted with BVLC's layers. What it changes, and how it is counted here:
- ImageData's new_dim and bicubic (caffe.proto:808, 811): the image's shorter side is resized to
  new_dim (util/io.cpp:91-123). Its DataTransformer wants the mean file at the crop's size, not the
  image's (data_transformer.cpp:256-263): the ImageData class below.
- cuDNN convolution: a workspace limit of 8 KiB, not 8 MiB (cudnn_conv_layer.cpp:116), and 3 streams
  and workspaces whatever the group (MAX_GROUP 1, cpp:13, 24-26, 192-193): the Convolution class below.
  Its Caffe-engine GPU code runs grouped convolutions with kernels of its own (conv_layer.cu:56-68,
  188-216), with no im2col buffer and two blobs of its own: the Convolution class below.
- Filter keeps a selector blob of its own and takes filter_param's num_output (filter_layer.cpp:9-66):
  not sized here. Matmul has no layer parameter in its caffe.proto (matmul_param is commented out) and
  no rule here. LossLayer no longer insists on two bottoms (loss_layer.hpp:32), which shapes nothing.

File and line references are to that commit's files.
"""
from . import conv, data, touch
from .base import Layer, c_round, count, float32, register

FORK = "caffe_pro"
WORKSPACE_LIMIT = 8 * 1024  # cudnn_conv_layer.cpp:116: workspace_limit_bytes = 8*1024; //8*1024*1024
MAX_GROUP = 1  # cudnn_conv_layer.cpp:13: streams, handles and workspaces for min(group, MAX_GROUP) groups


@register("ImageData", fork=FORK)
class ImageData(data.ImageData):
    """BVLC's ImageDataLayer with new_dim and bicubic (image_data_layer.cpp:26-103, 114-179): the same
    list, prefetch batches, label top and shuffle RNG, each image read by ReadImageToCVMat(..., new_dim,
    is_color, bicubic) (cpp:79-80, 133-134, 152-153).

    With new_dim > 0 that function resizes the shorter side to new_dim and the other by the same float
    factor, rounded (io.cpp:91-123; new_height/new_width are then ignored, and setting both is refused,
    cpp:38-39); bicubic only picks the interpolation. InferBlobShape then gives crop x crop when
    crop_size is set (data_transformer.cpp:494-510), and stops where new_dim is smaller than the crop
    (:501-502). So with a crop the tops follow from the file; without one, from the first image.

    Its Transform(cv::Mat) checks the mean file against the crop, not the image (data_transformer.cpp:
    256-263) and subtracts it from the crop (:312-316): the mean is C x crop x crop, and a mean file
    without a crop_size is refused. The transformer still loads the whole file (:27-29)."""

    def fixed_size(self):
        size = super().fixed_size()
        self.check(not (self.param().new_dim and size),
                   "new_dim and new_height/new_width cannot be set together (image_data_layer.cpp:38-39: "
                   "'Both new_dim and (new_height + new_width) cannot be non-zero at the same time')")
        return size

    def resized(self, height, width):
        """(H, W) of an image of that size after the new_dim resize (io.cpp:100-109): a float scale,
        new_dim over the shorter side, times the longer side, rounded."""
        new_dim = self.param().new_dim
        scale = float32(float32(new_dim) / float32(min(height, width)))
        if height >= width:
            return c_round(float32(scale * height)), new_dim
        return new_dim, c_round(float32(scale * width))

    def data_shape(self, batch):
        p, tp = self.param(), self.lp.transform_param
        if not (p.new_dim or tp.mean_file):
            return super().data_shape(batch)  # BVLC's, line for line
        channels = 3 if p.is_color else 1
        self.read_mean()
        self.decodes = True
        fixed = self.fixed_size()
        if self.declared():
            return None, "--input"
        crop = self.crop()
        self.check(not p.new_dim or p.new_dim >= crop,
                   f"crop_size {crop} is larger than the image after new_dim ({p.new_dim} on its shorter side; "
                   "data_transformer.cpp:501-502)")
        self.check_mean(channels)
        read = self.first_image(p.source, self.first_names, batch, channels, crop or fixed)
        if read is not None:
            (h, w), origin, _ = read
            stored = fixed or (self.resized(h, w) if p.new_dim else (h, w))
            if fixed:
                origin += f", resized to {fixed[1]}x{fixed[0]}"
            elif p.new_dim:
                origin += f", resized by new_dim to {stored[1]}x{stored[0]}"
            self.stored = (channels,) + tuple(stored)
            self.check_transform(channels, *stored, "the image" + (" after its resize" if fixed or p.new_dim else ""))
            return (channels, crop or stored[0], crop or stored[1]), origin
        if fixed:
            self.stored = (channels,) + tuple(fixed)
            self.check_transform(channels, *fixed, "the image after new_height/new_width")
        origin = "the layer's parameters (is_color" + (", new_height/new_width" if fixed else "") + \
                 (", new_dim" if p.new_dim else "") + ", crop_size)"
        return (channels, crop or fixed[0], crop or fixed[1]), origin

    def check_mean(self, channels):
        """The fork's CHECKs of the mean file (data_transformer.cpp:257-259): channels, and crop_size
        for its height and width."""
        tp = self.lp.transform_param
        if not tp.mean_file:
            return
        crop = tp.crop_size
        self.check(crop > 0, "this Caffe checks the mean file's height and width against crop_size "
                   "(data_transformer.cpp:258-259), so a mean file needs a crop_size",
                   fix="set transform_param { crop_size }, or use mean_value")
        if self.mean_shape is not None:
            self.check(self.mean_shape == (channels, crop, crop),
                       f"the mean file is {'x'.join(map(str, self.mean_shape))} but this Caffe wants it at the "
                       f"crop's size, {channels}x{crop}x{crop} (data_transformer.cpp:257-259)",
                       fix="use a mean of the crop's size: this Caffe subtracts it from the crop")

    def check_transform(self, channels, height, width, what):
        """DataTransformer's CHECKs on an image of this size, the mean's as the fork makes them."""
        tp = self.lp.transform_param
        crop = tp.crop_size
        self.check(height >= crop and width >= crop, f"crop_size {crop} is larger than {what} ({height}x{width})")
        self.check_mean(channels)
        values = len(tp.mean_value)
        self.check(values in (0, 1, channels),
                   f"{values} mean_value entries for {channels} channels (Caffe: 'Specify either 1 mean_value "
                   "or as many as channels')")

    def mean_elements(self):
        """The mean file's blob: its shape when read, else the C x crop x crop the fork checks it is."""
        tp = self.lp.transform_param
        if not tp.mean_file:
            return 0
        if self.mean_shape is not None:
            return count(self.mean_shape)
        return (3 if self.param().is_color else 1) * tp.crop_size * tp.crop_size

    def reader_touches(self, run):
        """BVLC's, with cv::resize's state also where new_dim resizes (io.cpp:110-114; measured with
        BVLC's bilinear resize, taken for the bicubic one too)."""
        t = super().reader_touches(run)
        if self.param().new_dim and not self.fixed_size():
            t.append(touch.host("cv::resize thread state", data.OPENCV_RESIZE_BYTES))
        return t


@register("Convolution", fork=FORK)
class Convolution(conv.Convolution):
    """BVLC's ConvolutionLayer (conv_layer.cpp and BaseConvolutionLayer as BVLC 9b89154's), with the
    fork's cuDNN workspace: each algorithm picked under 8 KiB (cudnn_conv_layer.cpp:116), and
    min(group, 1) x 3 workspaces (cpp:24-26, 41, 192-193), which the groups share (cu:22-27). In GPU
    mode with Caffe's engine, a grouped convolution runs the fork's own kernels (grouped_touches)."""

    workspace_limit = WORKSPACE_LIMIT
    workspace_groups = MAX_GROUP

    def touches(self, run):
        geo, channels, num_output, group = self._setup(run.bottoms)
        if group == 1 or run.mode != "gpu" or self.uses_cudnn(run):
            return super().touches(run)
        return self.grouped_touches(run, geo)

    def grouped_touches(self, run, geo):
        """The fork's GPU code for group > 1 (conv_layer.cu, a depthwise convolution: each channel
        with its own filter). Forward_gpu: spatial_conv_fwd_kernel writes the top from the bottom
        and the filters, with no im2col buffer and no bias (:56-68, the bias add commented out), so
        bias_multiplier_, set to ones on the host in Reshape, reaches the device only in the bias
        gradient (:179-184). Backward_gpu takes the weight diff (:175) and, where the filters or
        the bottom want a gradient, the bottom diff (:187); it reshapes sum_multiplier_ to the top's
        height x width, ones set on the host (:189-190), and for the filters' gradient `buffer` to
        (top count / num) x kh x kw, which spatial_conv_bwd_weight_kernel writes and a gemv with
        sum_multiplier_ reduces into the weight diff (:192-205); spatial_conv_bwd_feature_kernel
        writes the bottom diff (:207-216). Both blobs are members of the fork's ConvolutionLayer
        (conv_layer.hpp:81-82)."""
        top_spatial = count(run.tops[0], geo.axis + 1)
        bias_grad = self.param.bias_term and run.param_propagate_down[1]
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        if self.param.bias_term:
            t.append(touch.buffer("bias_multiplier_", top_spatial, "backward" if bias_grad else "setup",
                                  per_sample=False, device="device" if bias_grad else "host"))
        t += [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        t += [touch.top(j, "diff", "backward") for j in range(len(run.tops))]
        t.append(touch.param(0, "diff", "backward"))
        if bias_grad:
            t.append(touch.param(1, "diff", "backward"))
        wants = [run.param_propagate_down[0] or down for down in run.propagate_down]
        t += [touch.bottom(j, "diff", "backward") for j, w in enumerate(wants) if w]
        if any(wants):
            t.append(touch.buffer("sum_multiplier_", top_spatial, "backward", per_sample=False))
        if run.param_propagate_down[0]:
            per_image = count(run.tops[0]) // run.tops[0][0] * count(geo.kernel)
            t.append(touch.buffer("buffer", per_image, "backward", per_sample=False,
                                  note="(top count / num) x kh x kw"))
        return t


@register("Filter", fork=FORK)
class Filter(Layer):
    """The fork's FilterLayer: a selector blob of its own (filter_layer.cpp:14-27) and tops of
    filter_param's num_output along its axis (cpp:57-65), NOT_IMPLEMENTED on the CPU. Refused."""

    def reshape(self, bottoms):
        self.fail("protoaudit has no rule for this Caffe's Filter (its own selector blob and filter_param: "
                  "filter_layer.cpp:9-66)", fix="declare its tops with --input to audit the rest of the net")
