"""An R-CNN window file's first entry (window_data_layer.cpp's format):

    # image_index
    img_path
    channels
    height
    width
    num_windows
    class_index overlap x1 y1 x2 y2   (num_windows lines)

WindowDataLayer reads the whole file and shapes its data top with the channels of the last entry
it read; the entries of a working file all agree (every image is decoded in colour, so they say 3),
and protoaudit reads the first one only.
"""
from . import DatasetError

LIMIT = 1 << 16


def first_entry(path):
    """(image path, channels, height, width) of the first entry."""
    try:
        with open(path, "rb") as f:
            tokens = f.read(LIMIT).split()[:6]
    except OSError as e:
        raise DatasetError(f"window file {path}: cannot be read ({e.strerror})") from None
    if not tokens:
        raise DatasetError(f"window file {path} is empty (Caffe: 'Window file is empty')")
    try:
        if tokens[0] != b"#" or len(tokens) < 6:
            raise ValueError
        int(tokens[1])
        channels, height, width = (int(t) for t in tokens[3:6])
    except ValueError:
        raise DatasetError(f"window file {path}: its first entry is not '# index / path / channels / height / "
                           "width'") from None
    return tokens[2].decode("utf-8", "surrogateescape"), channels, height, width
