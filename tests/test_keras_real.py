"""Real users' Keras model files against TensorFlow (tests/data/keras_oracle/real, and real2 and real3
from other repositories).

Each file is one a user committed to GitHub (SOURCES.md: a model.to_json() output or a TensorFlow.js
model.json), measured in the oracle's kit as it stands: TensorFlow 2.21 on CPU, the exact heap
interposer, tf_keras 2.21 for files Keras 2 wrote and Keras 3.15 for those Keras 3 wrote, a mean
squared error on random targets, the optimizer and batch given in runs.tsv, three processes each (the
third measured later on the same kit and builders: README.md).
README.md says how they were chosen and what protoaudit said of them before any change."""
import csv
import functools
import os
from collections import defaultdict

import pytest

from protoaudit.keras.audit import audit_keras

REAL = os.path.join(os.path.dirname(__file__), "data", "keras_oracle", "real")
# a second set, from other repositories, measured the same way (real2/README.md)
REAL2 = os.path.join(os.path.dirname(__file__), "data", "keras_oracle", "real2")
# a third, from others again, measured the same way and audited before any change made for it (real3/README.md)
REAL3 = os.path.join(os.path.dirname(__file__), "data", "keras_oracle", "real3")
# a fourth, kept apart while the weight gradients' order was traced on the other three and scored once after
# (real4/README.md)
REAL4 = os.path.join(os.path.dirname(__file__), "data", "keras_oracle", "real4")
SLOTS = {"sgd": {"tf_keras": 1, "keras3": 0}, "adam": {"tf_keras": 2, "keras3": 2},
         "rmsprop": {"tf_keras": 1, "keras3": 1}, "sgd(momentum=0.9)": {"tf_keras": 1, "keras3": 1}}
# The 9 files the step model misses by more than 10% (README.md), by kind of model; traced where said:
KNOWN_MISSES = {
    # CNNs: the order of a convolution's or a Dense layer's gradient ops, which Grappler's graph order
    # decides (traced: 116 and 125, Keras 3 with RMSprop, run every one in the chain; 093 and 198, Keras 3
    # with Adam), or with the executor's order and under still (055, -10.3%; 177, -13.2%)
    "055", "093", "116", "125", "177", "198",
    # (010, 029, 040, 044, 115, 131, 154, 202 and 211, tf_keras CNNs with SGD or RMSprop, -16.7% to +38.4%,
    # are within 10% since their first two layers that hand a gradient on run their weight gradients and
    # updates in the chain and the others set theirs aside, as the executor's log of each shows:
    # rules.leads_chain, Dense.updates_in_chain; 058 and 127, Keras 3 CNNs with plain SGD, +12.1%, since
    # every convolution's runs in the chain: Conv.grads_late)
    # (143 and 205, +39.8% and +44.6%, LSTMs on an Embedding with mask_zero, are within 10% since a
    # masked input's LSTM holds one partial of each weight, traced on 205: Recurrent.masked)
    # (119, -24.0%, a Keras 3 LSTM under a Dense output, is within 10% since Keras 3's output Dense runs its
    # kernel gradient first: Dense.grads_late)
    # (100 and 166, GRUs returning their last output only, -21.3% and -59.2%, are within 10% since such a
    # GRU's gradient loop holds its recurrent-kernel partials in flight, as real3's 018 and 019 too:
    # Recurrent.runs_ahead)
    # (028, 158 and 171, recurrent steps under 1 MB, -21.1%, -17.8% and -25.2%, are within 10% since a
    # recurrent gradient loop's MatMul holds sgemm's workspace, as real2's 018 and real3's 038 too; 100, a GRU
    # whose loop runs ahead, went from +9.5% to +10.9%: Recurrent.loop_workspace)
    # (112, an implementation-0 LSTM over 200 steps, +11.9%, is within 10% since a loop of 90 steps or more
    # keeps one iteration's slice gradients, not 32: Recurrent.backward, INLINE_AFTER_RUNS)
    # (022, a Bidirectional GRU with input dropout, -10.3%, is within 10% since each direction's dropout mask
    # is held to its backward: Recurrent.keeps_dropout_masks)
    # (030 and 142, LSTMs with dropout and recurrent_dropout, -12.3% and -11.7%, are within 10% since their
    # cell keeps its input dropout masks per step, traced on 030: Recurrent.per_step)
    # (100, three stacked GRUs over 12 steps, +10.9%, is within 10% since a loop of no more steps than it runs at
    # once holds every step's recurrent-kernel partial and no more, as the GRU(1024) stack's 24 over 24 steps)
    # (201, -26.9%, is within 10% since a third process took the order the model gives: README.md)
    # (016 and 106, Keras 3 LSTM models under a wide output Dense, -10.8% and -10.9%, are within 10% since an
    # element-wise loss's value is taken after the backward pass, its difference alive till then, traced on 106:
    # losses.loss_ops)
    # recurrent loops: the weights' partial gradients the gradient loop holds (a GRU(1024) stack held 24
    # recurrent-kernel partials, traced: the oracle's GRUs held none to fifteen), LSTMs with
    # recurrent_dropout, hard_sigmoid LSTMs the cell-step counts over-predict
    "107", "132",
    # steps under 1 MB, where TensorFlow's own allocations weigh most
    "149",
}
# (062, a Bidirectional LSTM stack with recurrent_dropout on a frozen Embedding, +19.9%, is within 10% since a
# recurrent_dropout cell whose input gradient is not wanted keeps no pieces of its kernel: Recurrent.per_step)
# The second set's misses (real2/README.md): two tf_keras CNNs with plain SGD (their weight gradients' order:
# 041 runs every layer's in the chain), recurrent models (a GRU of 1,582 steps with implementation 1 and
# dropout, a bidirectional LSTM)
KNOWN_MISSES2 = {"002", "032", "041", "055"}
# (016, 025, 038, 043, 049 and 053, tf_keras CNNs, -13.8% to +21.2%, are within 10% since their weight gradients'
# order is the executor's (rules.leads_chain); 002, +10.4%, went out so, and 041 runs every layer's in the chain)
# (014, a one-Dense model's step under 1 MB, -41.8%, is within 10% since tf_keras's data adapter's second copy
# of the batch, freed before the forward pass, is counted: program.build_step)
# The third set's (real3/README.md): recurrent models (a hard_sigmoid GRU stack, a stateful LSTM at batch 1)
KNOWN_MISSES3 = {"022", "047"}
# (026 and 040, tf_keras Conv1D models, +20.7% and -10.6%, are within 10% since their weight gradients' order is
# the executor's: rules.leads_chain)
# (015 and 020, relu LSTMs, +12.3% and +45.0%, are within 10% since an off-fused LSTM's loop holds its kernel's
# partials and its recurrent kernel's only over a few steps: Recurrent.partials)
# The fourth set's (real4/README.md): an LSTM text model, a Keras 3 CNN on 200 x 200 images with Adam, two masked
# SimpleRNNs over 387 steps, an InceptionV3 with a frozen base
KNOWN_MISSES4 = {"008", "014", "015", "026"}
# (008, an LSTM on an Embedding, went from +9.5% to +10.3% when the loss's value was taken after the backward pass,
# as traced on real's 106, after the set's one scoring: losses.loss_ops)
# Held where they stand (README.md: 171 of 180 with three processes each, a median of 1.2%; real2: 48 of 52, 1.5%;
# real3: 39 of 41, 1.6%; the bar is 90% and 3%), so that a regression fails
SHARE, MEDIAN = 0.95, 0.02  # (171 of 180, 1.2%)
SHARE2, MEDIAN2 = 0.92, 0.02  # (48 of 52, 1.5%)
SHARE3, MEDIAN3 = 0.95, 0.02  # (39 of 41, 1.6%)
SHARE4, MEDIAN4 = 0.9, 0.02  # (37 of 41, 1.5%; 38 when scored once, before losses.loss_ops took the loss value last)


def _configurations(folder, prefix=""):
    if not os.path.exists(os.path.join(folder, "runs.tsv")):
        return []
    runs = defaultdict(list)
    with open(os.path.join(folder, "runs.tsv")) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            runs[(r["file"], r["optimizer"], r["batch"])].append(r)
    return [pytest.param(os.path.join(folder, "models", k[0]), rs, id=prefix + k[0][:3])
            for k, rs in sorted(runs.items())]


CONFIGS = _configurations(REAL)
CONFIGS2 = _configurations(REAL2, "real2:")
CONFIGS3 = _configurations(REAL3, "real3:")
CONFIGS4 = _configurations(REAL4, "real4:")


@functools.lru_cache(maxsize=None)
def audited(path, optimizer, batch):
    return audit_keras(path, batch=batch, optimizer=optimizer, loss="mse", mode="cpu")


@pytest.mark.parametrize("path,runs", CONFIGS + CONFIGS2 + CONFIGS3 + CONFIGS4)
def test_weights_and_slots_are_what_tensorflow_holds(path, runs):
    r = runs[0]
    a = audited(path, r["optimizer"], int(r["batch"]))
    assert a.flavour == r["flavour"]
    assert (a.params, a.trainable_params) == (int(r["params"]), int(r["trainable_params"]))
    assert (a.weights_bytes, a.trainable_bytes) == (int(r["weights_bytes"]), int(r["trainable_bytes"]))
    assert abs(a.slot_bytes - int(r["trainable_bytes"]) * SLOTS[r["optimizer"]][r["flavour"]]) <= 65536


@pytest.mark.parametrize("path,runs", CONFIGS + CONFIGS2 + CONFIGS3 + CONFIGS4)
def test_step_peak_is_within_ten_percent_of_tensorflow(path, runs, request):
    folder = os.path.dirname(os.path.dirname(path))
    known = {REAL4: KNOWN_MISSES4, REAL3: KNOWN_MISSES3, REAL2: KNOWN_MISSES2}.get(folder, KNOWN_MISSES)
    if os.path.basename(path)[:3] in known:
        request.applymarker(pytest.mark.xfail(strict=True, reason="a known miss of the step model"))
    r = runs[0]
    peaks = [int(x["step2_peak_extra"]) for x in runs]
    peak = audited(path, r["optimizer"], int(r["batch"])).step_peak_bytes
    assert 0.9 * min(peaks) <= peak <= 1.1 * max(peaks), (peak, peaks)


@pytest.mark.parametrize("configs,share,median", [(CONFIGS, SHARE, MEDIAN), (CONFIGS2, SHARE2, MEDIAN2),
                                                   (CONFIGS3, SHARE3, MEDIAN3), (CONFIGS4, SHARE4, MEDIAN4)],
                         ids=["real", "real2", "real3", "real4"])
def test_real_files_are_matched_overall(configs, share, median):
    """The issue's bar on files nobody here wrote: 10% of TensorFlow's measured range for 90% of them,
    a median under 3%; held where they stand."""
    if not configs:
        pytest.skip("no measurements")
    errors = []
    for p in configs:
        path, runs = p.values
        r = runs[0]
        peaks = [int(x["step2_peak_extra"]) for x in runs]
        low, high = min(peaks), max(peaks)
        peak = audited(path, r["optimizer"], int(r["batch"])).step_peak_bytes
        errors.append(0.0 if low <= peak <= high else min(abs(peak - low) / low, abs(peak - high) / high))
    errors.sort()
    assert sum(e <= 0.10 for e in errors) >= share * len(errors)
    assert errors[len(errors) // 2] < median



def _order(a, *labels):
    """Where each of these steps comes in the audit's step (its program), by label."""
    steps = [st.label for st in a.program.steps]
    return [steps.index(label) for label in labels]


def test_tf_keras_runs_its_first_two_layers_weight_gradients_in_the_chain():
    """The order TensorFlow's executor ran (its log of every op, step 2, tf_keras with SGD at batch 32).
    real's 211, a VGG-like CNN (14 convolutions and Dense layers handing a gradient on): block1_conv2 and
    block2_conv1 ran Conv2DBackpropFilter, then their updates, before Conv2DBackpropInput; block2_conv2 and
    every layer above it ran Conv2DBackpropInput (MatMul) first and its filter (kernel) gradient after the
    chain. TensorFlow held 230,319,352 to 230,321,706 bytes (the step's figure was 26% under with every
    filter gradient in the chain). real's 115, a small CNN with two Dense: dense_1 ran BiasAddGrad and its
    update's Neg, Mul, AddV2 and assigns, MatMul_1 and its update's, then the input gradient's MatMul;
    conv2d_2 likewise; the output Dense its MatMul first. TensorFlow held 43,828,633 to 43,829,058 bytes
    (11% over with dense_1's kernel gradient and its 4.7 MB m * momentum held to the chain's end)."""
    path = next(p.values[0] for p in CONFIGS if os.path.basename(p.values[0]).startswith("211"))
    a = audited(path, "sgd", 32)
    for layer in ("block1_conv2", "block2_conv1"):
        made, updated, handed = _order(a, f"{layer} Conv2DBackpropFilter", f"{layer}/kernel assign m",
                                       f"{layer} Conv2DBackpropInput")
        assert made < updated < handed
    made, handed = _order(a, "block2_conv2 Conv2DBackpropFilter", "block2_conv2 Conv2DBackpropInput")
    assert handed < made
    assert 0.9 * 230_319_352 <= a.step_peak_bytes <= 1.1 * 230_321_706
    path = next(p.values[0] for p in CONFIGS if os.path.basename(p.values[0]).startswith("115"))
    a = audited(path, "sgd", 32)
    made, updated, handed = _order(a, "dense_1 kernel gradient", "dense_1/kernel assign m", "dense_1 input gradient")
    assert made < updated < handed
    made, handed = _order(a, "dense_2 kernel gradient", "dense_2 input gradient")
    assert handed < made
    assert 0.9 * 43_828_633 <= a.step_peak_bytes <= 1.1 * 43_829_058


def test_the_weight_gradients_order_is_the_executors_for_most_layers():
    """orders.tsv (real, real2, real3): for each Dense layer and convolution of the tf_keras files, whether
    TensorFlow's executor ran its weight gradient before its input gradient (chain) or after the chain
    (late), read off its log of every op it ran in step 2 (TF_CPP_VMODULE=executor=1, the kit's build of the
    file in the configuration of runs.tsv). The audit's step runs them in that order for 911 of the 1,032
    layers (88%; 718 before rules.leads_chain), held where it stands."""
    agree = total = 0
    steps_of = {}  # (path, optimizer, batch) -> the labels of the audit's step, in order
    for folder in (REAL, REAL2, REAL3):
        with open(os.path.join(folder, "orders.tsv")) as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        for r in rows:
            key = (os.path.join(folder, "models", r["file"]), r["optimizer"], int(r["batch"]))
            if key not in steps_of:
                steps_of[key] = [st.label for st in audited(*key).program.steps]
            steps = steps_of[key]
            layer = r["layer"]
            made = [steps.index(f"{layer} {what}") for what in ("Conv2DBackpropFilter", "kernel gradient")
                    if f"{layer} {what}" in steps]
            handed = [steps.index(f"{layer} {what}") for what in ("Conv2DBackpropInput", "input gradient")
                      if f"{layer} {what}" in steps]
            if made and handed:  # (a layer inside a nested model or a wrapper is named otherwise in the log)
                total += 1
                agree += ("chain" if made[0] < handed[0] else "late") == r["weight_gradient"]
    assert total > 1000 and agree >= 0.88 * total, (agree, total)


def test_an_element_wise_losss_value_is_taken_after_the_backward_pass():
    """real's 106, Embedding -> Bidirectional(LSTM) -> Dense(6,120, softmax), Keras 3, mean squared error, SGD
    at batch 32: TensorFlow held 24,036,847 to 25,062,707 bytes. Its executor's log (step 2) ran
    compile_loss/mse/sub (y_true - y_pred, 32 x 6,120 floats, 783,360 bytes) with the forward pass and its
    gradient's Mul at once, and the loss value's Square and Mean after the LSTMs' backward loops: the
    difference was alive at the peak, the output Dense's kernel gradient and its update (7,344,000 bytes
    each), and the step's figure was 10.9% under without it. tf_keras's log of a user's CNN (real's 115)
    ran mean_squared_error/SquaredDifference, of the labels and the output, after every gradient op."""
    path = next(p.values[0] for p in CONFIGS if os.path.basename(p.values[0]).startswith("106"))
    a = audited(path, "sgd", 32)
    steps = [st.label for st in a.program.steps]
    assert steps.index("loss square") > steps.index("bidirectional backward loop")
    assert (32 * 6120 * 4, 1, "loss difference", "activation") in a.peak.groups
    assert 0.9 * 24_036_847 <= a.step_peak_bytes <= 1.1 * 25_062_707


def _loop_scratch(a):
    """The scratch of the first recurrent gradient loop the audit's step runs (the last layer's)."""
    return next(st.scratch for st in a.program.steps if st.label.endswith("input gradient (backward loop)"))


def test_a_grus_recurrent_partials_in_flight_are_held_where_its_loop_runs_ahead():
    """real3's 018, a GRU(128) over 52 steps of one feature with three Dense after it, SGD at batch 32:
    TensorFlow held 12,474,947 to 12,509,115 bytes above the step's start, where the step's figure was
    6.1 MB without them. Traced, 34 of the GRU's recurrent-kernel partial gradients (128 x 384 floats,
    196,608 bytes each) were alive at the peak, computed by the gradient loop's iterations in flight
    (parallel_iterations 32) ahead of their accumulation. The GRU returns its last output only, so its loop
    runs ahead: the step's loop holds min(32, 52) + 2 = 34 of them, 6,684,672 bytes, and so meets the
    measured range."""
    path = next(p.values[0] for p in CONFIGS3 if os.path.basename(p.values[0]).startswith("018"))
    a = audited(path, "sgd", 32)
    unit = 32 * 128 * 4
    # + sgemm's workspace, held by the loop's running MatMul (Recurrent.loop_workspace)
    assert _loop_scratch(a) == 8 * unit + 34 * 128 * 384 * 4 + 74_176
    assert 0.9 * 12_474_947 <= a.step_peak_bytes <= 1.1 * 12_509_115
    # a loop of no more steps than it runs at once holds every step's partial and no more (traced: a
    # GRU(1024) stack over 24 steps, 24 of them): real's 100, its last GRU(100) over 12 steps, 12 of
    # 100 x 300 floats; TensorFlow held 5,061,685 to 5,069,030 bytes
    path = next(p.values[0] for p in CONFIGS if os.path.basename(p.values[0]).startswith("100"))
    a = audited(path, "sgd", 32)
    assert _loop_scratch(a) == 8 * 32 * 100 * 4 + 12 * 100 * 300 * 4 + 74_176
    assert 0.9 * 5_061_685 <= a.step_peak_bytes <= 1.1 * 5_069_030


def test_a_long_loops_accumulations_keep_up_with_its_iterations():
    """real's 112, an LSTM(100) of implementation 0 (tf_keras runs it as 1) with hard_sigmoid gates over 200
    steps of 100 features, SGD at batch 32: TensorFlow held 107,207,425 to 109,769,414 bytes. Traced, the
    gradient loop's slice gradients of the recurrent kernel (100 x 400 floats, 160,000 bytes) were 4 at the
    peak, one iteration's, where an LSTM over 29 steps held all 116: its executor runs a cheap op inline
    once its estimate, 1e8 cycles less a tenth a run, is under 8,000 cycles, after 90 runs, and a loop of
    200 steps has run its body that often before the measured step. So its loop holds one iteration's
    partials: four recurrent-kernel slices' gradients and the split kernel's, 5 x 160,000 bytes, beside 8
    unit tensors of 32 x 100 floats and sgemm's workspace."""
    path = next(p.values[0] for p in CONFIGS if os.path.basename(p.values[0]).startswith("112"))
    a = audited(path, "sgd", 32)
    loop = _loop_scratch(a)
    assert loop == 5 * 160_000 + 8 * 32 * 100 * 4 + 74_176
    assert 0.9 * 107_207_425 <= a.step_peak_bytes <= 1.1 * 109_769_414


def test_a_bidirectional_layers_input_dropout_masks_are_held_to_its_backward():
    """real's 022, Embedding(500 x 100) -> Dropout -> Bidirectional(GRU(64, dropout=0.2)) -> GRU(64) -> Dense,
    SGD at batch 32: TensorFlow held 136,579,771 to 136,580,009 bytes; traced, two 6,400,000-byte blocks
    (32 x 500 x 100 floats, each direction's input dropout mask) were alive at the peak, in the second GRU's
    gradient loop.
    The step holds both from the forward pass to the Bidirectional's backward loop, which reads them."""
    path = next(p.values[0] for p in CONFIGS if os.path.basename(p.values[0]).startswith("022"))
    a = audited(path, "sgd", 32)
    program = a.program
    masks = [k for k, b in enumerate(program.bufs) if b.label.endswith("input dropout masks")]
    assert [program.bufs[k].bytes for k in masks] == [2 * 32 * 500 * 100 * 4]
    loop = next(st for st in program.steps
                if st.label.endswith("input gradient (backward loop)") and masks[0] in st.reads)
    assert program.bufs[loop.makes[0]].bytes == 32 * 500 * 100 * 4


def test_a_recurrent_dropout_cells_steps_keep_their_input_dropout_masks():
    """real's 030, Embedding(200 x 32) -> SpatialDropout1D -> LSTM(50, dropout=0.5, recurrent_dropout=0.5),
    Adam at batch 32: TensorFlow held 41,710,224 to 41,819,490 bytes. Traced: 3,536 blocks of 32 x 50 floats
    (6,400 bytes: 13 unit tensors a step and the 4 pieces of the 32 x 200 kernel, 50 columns each), 768 of
    50 x 50 (the recurrent kernel's slices, 4 a step) and 1,776 of 32 x 32 floats (4,096 bytes: 8.9 a step,
    the step's input, its 4 masked copies and the 4 dropout masks tf_keras's cell makes inside the step)."""
    path = next(p.values[0] for p in CONFIGS if os.path.basename(p.values[0]).startswith("030"))
    a = audited(path, "adam", 32)
    lists = next(b.bytes for b in a.program.bufs if b.label == "lstm per-step tensors kept for the gradient")
    assert lists == 200 * (13 * 6_400 + 4 * 50 * 50 * 4 + 4 * 6_400 + 9 * 4_096)
    assert a.step_peak_bytes >= 0.9 * 41_710_224


def test_a_recurrent_dropout_cell_on_a_frozen_input_keeps_no_kernel_pieces():
    """real2's 062, a frozen Embedding(16185 x 200) under three Bidirectional LSTMs (256, 128, 128 units)
    with dropout and recurrent_dropout 0.2, SGD at batch 8: TensorFlow held 1,900,454,389 to 1,900,454,704
    bytes. Traced at the peak: none of the first layer's kernel pieces (200 x 256 floats, 204,800 bytes),
    4 masked inputs of 8 x 200 floats a step and direction (6,400 bytes x 2,048), where the next layers,
    whose input gradient is wanted, kept their pieces (512 x 128 floats, 262,144 bytes, 4 a step)."""
    path = next(p.values[0] for p in CONFIGS2 if os.path.basename(p.values[0]).startswith("062"))
    a = audited(path, "sgd", 8)
    name = next(n.layer.name for n in a.graph.nodes if n.layer.class_name == "Bidirectional")
    lists = next(b.bytes for b in a.program.bufs if b.label == f"{name} per-step tensors kept for the gradient")
    unit, step_in = 8 * 256 * 4, 8 * 200 * 4
    # 256 steps, two directions: the step's input, 13 unit tensors, 4 slices of the recurrent kernel and 4
    # masked inputs; no pieces of the kernel and no input masks
    assert lists == 2 * 256 * (step_in + 13 * unit + 4 * 256 * 256 * 4 + 4 * step_in)
    assert 0.9 * 1_900_454_389 <= a.step_peak_bytes <= 1.1 * 1_900_454_704


def test_an_off_fused_lstms_loop_holds_its_kernels_partials():
    """real3's 020, an LSTM(50) with relu over 40 steps of one feature, SGD at batch 32: TensorFlow held
    2,579,964 to 2,586,102 bytes. Traced at the peak: 273 blocks of 32 x 50 floats (7 a step) and none of the
    recurrent kernel's partial gradients (50 x 200 floats, 40,000 bytes), which counted one per iteration
    in flight made 3.75 MB. Its loop holds its kernel's partials (1 x 200 floats), 32 of them, 8 unit
    tensors and sgemm's workspace."""
    path = next(p.values[0] for p in CONFIGS3 if os.path.basename(p.values[0]).startswith("020"))
    a = audited(path, "sgd", 32)
    loop = _loop_scratch(a)
    assert loop == 8 * 32 * 50 * 4 + 32 * 1 * 200 * 4 + 74_176
    assert 0.9 * 2_579_964 <= a.step_peak_bytes <= 1.1 * 2_586_102


def test_tf_keras_copies_the_batch_once_more_at_the_steps_start():
    """real2's 014, one Dense(1) on 2,400 features, SGD at batch 32: TensorFlow held 904,917 to 906,296 bytes
    above the step's start. Traced: two blocks of 32 x 2,400 floats (307,200 bytes) made at the step's
    start, from the array, one freed before the first op, and about 0.3 MB of TensorFlow's own small blocks.
    The step's peak holds the batch twice there."""
    path = next(p.values[0] for p in CONFIGS2 if os.path.basename(p.values[0]).startswith("014"))
    a = audited(path, "sgd", 32)
    assert a.step_peak_bytes >= 2 * 32 * 2_400 * 4
    assert a.step_peak_bytes >= 0.9 * 904_917
