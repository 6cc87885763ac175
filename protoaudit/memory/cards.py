"""GPU memory sizes by the name Caffe logs for a card (`GPU 0: GeForce GTX 1080 Ti`), so a log
that died out of memory can be held against its card without --gpu-mem. Nominal sizes from the
vendors' specifications; a name sold with several sizes (GTX 960: 2 or 4 GB) is left out."""
GIB = 2**30

CARD_GIB = {
    "GeForce GTX 750 Ti": 2,
    "GeForce GTX 780": 3,
    "GeForce GTX 780 Ti": 3,
    "GeForce GTX TITAN": 6,
    "GeForce GTX TITAN Black": 6,
    "GeForce GTX TITAN Z": 6,
    "GeForce GTX 970": 4,
    "GeForce GTX 980": 4,
    "GeForce GTX 980 Ti": 6,
    "GeForce GTX TITAN X": 12,
    "GeForce GTX 1070": 8,
    "GeForce GTX 1070 Ti": 8,
    "GeForce GTX 1080": 8,
    "GeForce GTX 1080 Ti": 11,
    "TITAN X (Pascal)": 12,
    "TITAN Xp": 12,
    "TITAN V": 12,
    "GeForce RTX 2070": 8,
    "GeForce RTX 2080": 8,
    "GeForce RTX 2080 Ti": 11,
    "TITAN RTX": 24,
    "GeForce RTX 3090": 24,
    "Tesla K20c": 5,
    "Tesla K20m": 5,
    "Tesla K40c": 12,
    "Tesla K40m": 12,
    "Tesla K80": 12,
    "Tesla M40 24GB": 24,
    "Tesla P100-PCIE-16GB": 16,
    "Tesla P100-SXM2-16GB": 16,
    "Tesla V100-PCIE-16GB": 16,
    "Tesla V100-SXM2-16GB": 16,
    "Tesla V100-SXM2-32GB": 32,
    "Tesla T4": 16,
    "Quadro M6000 24GB": 24,
}


def card_bytes(name):
    """The memory of the card Caffe named, in bytes, or None when protoaudit does not know it."""
    gib = CARD_GIB.get(name.strip())
    return gib * GIB if gib else None
