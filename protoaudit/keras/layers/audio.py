"""Keras 3's spectrogram layers (keras/src/layers/preprocessing/stft_spectrogram.py, mel_spectrogram.py)."""
import math

from .base import KerasLayer, conv_output_length, register


@register("STFTSpectrogram")
class STFTSpectrogram(KerasLayer):
    """A 1-D convolution of each channel with DFT kernels: frames of frame_length every frame_step
    (default frame_length // 2), fft_length // 2 + 1 frequencies (twice that in mode "stft"). build()
    adds real_kernel (all modes but "imag") and imag_kernel (all but "real"), each (frame_length, 1,
    frequencies), trainable unless the layer is (Keras's default is trainable)."""

    def lengths(self):
        """(frame_length, frame_step, fft_length) as __init__ fills them in."""
        frame = self.get("frame_length", 256)
        step = self.get("frame_step") or frame // 2
        fft = self.get("fft_length") or 2 ** int(math.ceil(math.log2(frame)))
        return frame, step, fft

    def kernels(self):
        mode = self.get("mode", "log")
        return [k for k, skip in (("real_kernel", "imag"), ("imag_kernel", "real")) if mode != skip]

    def output_specs(self, inputs):
        x = self.one(inputs)
        if len(x.shape) != 3:
            raise self.error(f"expects audio (batch, time, channels), got {x.shape}")
        frame, step, fft = self.lengths()
        batch, time, channels = (x.shape if self.channels_last() else (x.shape[0], x.shape[2], x.shape[1]))
        freqs = (fft // 2 + 1) * (2 if self.get("mode", "log") == "stft" else 1)
        padding = self.get("padding", "valid")
        if padding not in ("valid", "same"):
            raise self.error(f"padding {padding!r}: STFTSpectrogram takes valid or same")
        frames = conv_output_length(time, frame, padding, step)
        if self.get("expand_dims", False):
            shape = (batch, frames, freqs, channels) if self.channels_last() else (batch, channels, frames, freqs)
        else:
            shape = (batch, frames, freqs * channels) if self.channels_last() else (batch, freqs * channels, frames)
        return [self.spec(shape)]

    def weights(self, inputs):
        frame, _, fft = self.lengths()
        return [self.weight(name, (frame, 1, fft // 2 + 1)) for name in self.kernels()]


@register("MelSpectrogram")
class MelSpectrogram(KerasLayer):
    """(batch, num_mel_bins, frames) from (batch, samples), or without the batch from one signal.
    The frames are call()'s: the signal is padded by fft_length // 2 on each side (center=True) and
    framed fft_length long every sequence_stride, 1 + (samples + 2 * (fft_length // 2) - fft_length)
    // sequence_stride of them. Keras's compute_output_shape says (samples + stride + 1) // stride,
    one more where samples + 1 is a multiple of the stride (the tensors made are call()'s)."""

    def output_specs(self, inputs):
        x = self.one(inputs)
        if len(x.shape) not in (1, 2):
            raise self.error(f"expects signals (batch, samples), got {x.shape}")
        fft, stride = self.get("fft_length", 2048), self.get("sequence_stride", 512)
        length = self.get("sequence_length") or fft
        if length > fft:
            raise self.error(f"sequence_length {length} is over fft_length {fft}")
        frames = 1 + (x.shape[-1] + 2 * (fft // 2) - fft) // stride
        return [self.spec(x.shape[:-1] + (self.get("num_mel_bins", 128), frames))._replace(dtype=self.compute_dtype)]
