"""The floor under cudaMalloc's pages (protoaudit.memory.cuda_pages.floor), which lets the largest-batch
search rule out batches without packing every buffer: it must never exceed what the packing takes,
and it must see where buffers stop sharing a page, as a batch crossing a quarter page does."""
import random
from collections import Counter

import pytest

from protoaudit.memory.cuda_pages import PAGE, SLOT, floor, taken, tally


def lower(sizes):
    return floor(tally(Counter(sizes)))


def test_the_floor_never_exceeds_the_pages_taken():
    rng = random.Random(0)
    for _ in range(300):
        kinds = [rng.randint(1, PAGE // 64), rng.randint(PAGE // 5, PAGE // 2 + SLOT), rng.randint(1, 3 * PAGE)]
        sizes = [rng.choice(kinds) + rng.randint(0, 3) * SLOT for _ in range(rng.randint(1, 60))]
        assert lower(sizes) <= taken(sizes)


@pytest.mark.parametrize("size,count,pages", [
    # 4 x 524,288 = 2 MiB exactly: four share a page, 17 take ceil(17 / 4) = 5 pages
    (524_288, 17, 5),
    # 528,384 (the same buffer at batch 129 instead of 128): 4 x 528,384 = 2,113,536 > 2,097,152, so
    # at most 3 share a page: ceil(17 / 3) = 6 pages, though their bytes (8.57 MiB) fit in 5
    (528_384, 17, 6),
    # over half a page: one a page
    (PAGE // 2 + 1, 5, 5),
    # over a page: whole pages of its own, 2 MiB + 1 byte takes 4 MiB
    (PAGE + 1, 3, 6),
])
def test_buffers_too_large_to_share_a_page(size, count, pages):
    assert lower([size] * count) == taken([size] * count) == pages * PAGE


def chain(convs):
    """A net of `convs` 3x3 convolutions on 16 x 8 x 8 at batch 32: each top and its diff grow by
    16 * 8 * 8 * 4 = 4,096 bytes a sample, 524,288 at batch 128 (four to a page) and 528,384 at 129
    (three to a page)."""
    out = ['name: "chain"',
           'layer { name: "data" type: "Input" top: "data" top: "label" '
           'input_param { shape { dim: 32 dim: 16 dim: 8 dim: 8 } shape { dim: 32 } } }']
    x = "data"
    for i in range(convs):
        out.append(f'layer {{ name: "c{i}" type: "Convolution" bottom: "{x}" top: "c{i}" '
                   f'convolution_param {{ num_output: 16 kernel_size: 3 pad: 1 }} }}')
        x = f"c{i}"
    out.append(f'layer {{ name: "fc" type: "InnerProduct" bottom: "{x}" top: "fc" inner_product_param {{ num_output: 10 }} }}')
    out.append('layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }')
    return "\n".join(out) + "\n"


def test_the_search_stops_where_buffers_stop_sharing_pages(tmp_path):
    """With a card between the pages at batch 128 and at 129 (where every conv top and diff takes a
    third of a page instead of a quarter), the largest batch is 128, though the buffers' bytes alone
    fit batches beyond it: audits at 128 and 129 with their own pages confirm it."""
    import protoaudit
    from protoaudit.memory.fit import on_card

    path = tmp_path / "chain.prototxt"
    path.write_text(chain(60))
    at, after = protoaudit.audit(str(path), batch=128), protoaudit.audit(str(path), batch=129)
    card = (on_card(at) + on_card(after)) // 2
    assert after.total_bytes < card  # the bytes alone would fit 129
    assert protoaudit.audit(str(path), gpu_mem=card).fit.largest_batch == 128
    assert protoaudit.audit(str(path), gpu_mem=on_card(at)).fit.largest_batch == 128
    assert protoaudit.audit(str(path), gpu_mem=on_card(at) - 1).fit.largest_batch < 128
