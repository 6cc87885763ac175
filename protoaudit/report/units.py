"""How sizes and shapes are written for people."""
import functools


@functools.lru_cache(maxsize=4096)  # a per-layer table writes the same few sizes many times
def size(n):
    """Bytes in binary units with three significant figures: 1.5 GiB, 832 MiB, 4.0 KiB, 12 B."""
    n = int(n)
    for unit, scale in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20),
                        ("KiB", 2**10)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.3g} {unit}" if abs(value) < 999.5 else f"{value:.0f} {unit}"  # 999.7 is 1000, not 1e+03
    return f"{n} B"


@functools.lru_cache(maxsize=4096)  # and the same few shapes
def shape(dims):
    return "x".join(map(str, dims)) if dims else "scalar"


def shapes(list_of_dims):
    return ", ".join(map(shape, map(tuple, list_of_dims)))
