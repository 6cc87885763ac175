"""Builds GroupedQueryAttention, ReversibleEmbedding and the adaptive poolings in Keras 3 and writes
what each makes: the config's class_name, the output shapes, count_params and every variable."""
import json
import sys

import keras
from keras import layers

CASES = [  # (case, layer, input shapes, call kwargs)
    ("gqa_self", lambda: layers.GroupQueryAttention(head_dim=16, num_query_heads=8, num_key_value_heads=2),
     [(12, 32), (12, 32)], {}),
    ("gqa_cross_key", lambda: layers.GroupQueryAttention(head_dim=8, num_query_heads=4, num_key_value_heads=1,
                                                         use_bias=False), [(5, 24), (7, 24), (7, 10)], {}),
    ("gqa_scores", lambda: layers.GroupQueryAttention(head_dim=4, num_query_heads=6, num_key_value_heads=3),
     [(5, 16), (9, 16)], {"return_attention_scores": True}),
    ("gqa_gate", lambda: layers.GroupQueryAttention(head_dim=8, num_query_heads=4, num_key_value_heads=2,
                                                    use_gate=True), [(6, 20), (6, 20)], {}),
    ("rev_tied", lambda: layers.ReversibleEmbedding(100, 16), [(7,)], {}),
    ("rev_tied_reverse", lambda: layers.ReversibleEmbedding(100, 16), [(7, 16)], {"reverse": True}),
    ("rev_untied_reverse", lambda: layers.ReversibleEmbedding(100, 16, tie_weights=False, logit_soft_cap=30.0),
     [(7, 16)], {"reverse": True}),
    ("amax1d", lambda: layers.AdaptiveMaxPooling1D(5), [(17, 3)], {}),
    ("aavg2d", lambda: layers.AdaptiveAveragePooling2D((3, 4)), [(10, 9, 2)], {}),
    ("aavg2d_cf", lambda: layers.AdaptiveAveragePooling2D(2, data_format="channels_first"), [(3, 7, 7)], {}),
    ("amax3d", lambda: layers.AdaptiveMaxPooling3D((2, 3, 2)), [(5, 6, 7, 2)], {}),
]


def main(out):
    configs = {}
    with open(out, "w") as f:
        f.write("case\tclass_name\twhat\tname\tshape\tdtype\n")
        for case, make, shapes, kwargs in CASES:
            layer = make()
            inputs = [keras.Input(s, batch_size=2, dtype="int32" if case == "rev_tied" else "float32") for s in shapes]
            outs = layer(*inputs, **kwargs)
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            entry = keras.saving.serialize_keras_object(layer)
            cls = entry["class_name"]
            configs[case] = {"entry": {k: entry[k] for k in ("module", "class_name", "config", "registered_name")},
                             "inputs": [[2, *s] for s in shapes], "call": kwargs}
            for k, o in enumerate(outs):
                f.write(f"{case}\t{cls}\toutput\t{k}\t{tuple(o.shape)}\t{o.dtype}\n")
            f.write(f"{case}\t{cls}\tcount_params\t\t{layer.count_params()}\t\n")
            for v in layer.weights:
                f.write(f"{case}\t{cls}\tvariable\t{v.path.split('/', 1)[1]}\t{tuple(v.shape)}\t{v.dtype}\n")
    with open(out.replace(".tsv", "_configs.json"), "w") as f:
        json.dump(configs, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
