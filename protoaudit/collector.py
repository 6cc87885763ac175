"""Python's cycle collector paused for one command or audit: its full passes walk every object
the nets are made of (seconds on a 10,000-layer net, about 40% of the run, more in a program that
holds other large data), and an audit makes almost no reference cycles for it to free (a few
dozen); memory is still released by reference counting."""
import functools
import gc


def paused(fn):
    """`fn` with the cycle collector off while it runs (and back as it was afterwards)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return run
