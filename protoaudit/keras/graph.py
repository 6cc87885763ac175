"""A Keras model laid out as the calls it makes: nodes in execution order, with every tensor's shape.

Sequential and Functional models (either serialization of `inbound_nodes`), models used as layers
(flattened, each node with its path), layers called more than once (one set of weights, an output
per call), several inputs and outputs. The batch is the caller's, else the input's fixed one, else
32 (the batch_size `fit` uses by default).
"""
import heapq
from dataclasses import dataclass, field
from typing import List, Optional

from ..errors import InputError
from .layers import KerasLayer, Spec, make_layer
from .layers.base import MAX_ELEMENTS, elements, layer_class, policy_name, unreadable_kind
from .layers.core import ELEMENTWISE_TF

MODELS = frozenset({"Functional", "Model", "Sequential"})
MAX_DEPTH = 64  # models inside models; real ones nest two or three deep
DEFAULT_BATCH = 32  # keras Model.fit's batch_size when none is given
LISTED = 6  # the --input examples a refusal naming several layers spells out
# call arguments that are not the layer's data: they order the graph but are not its inputs (a
# recurrent layer's initial_state is: its inputs after the sequence, as tf_keras writes them)
NOT_DATA = frozenset({"mask", "attention_mask", "query_mask", "value_mask", "key_mask", "constants",
                      "training"})


@dataclass(eq=False)
class Tensor:
    name: str
    spec: Spec
    producer: Optional["Node"] = None


@dataclass(eq=False)
class Node:
    layer: KerasLayer
    inputs: List[Tensor]
    outputs: List[Tensor]
    path: str  # "model/submodel/layer"
    call_index: int  # which call of a shared layer this is


@dataclass(eq=False)
class Graph:
    nodes: List[Node]
    inputs: List[Tensor]
    outputs: List[Tensor]
    weights: list  # [(KerasLayer, Weight)], a shared layer's once
    batch: int
    batch_from: str  # "argument", "input" (the model's or a declared input's batch) or "default"
    flavour: str
    policy: str
    gaps: List[str] = field(default_factory=list)  # paths of layers whose outputs were declared
    output_names: List[str] = field(default_factory=list)  # the outputs' names, as compile's dict of losses keys them


def build_graph(model_file, batch=None, inputs=None):
    """The Graph of a ModelFile; `inputs` {input or layer name: full shape, batch first} declares
    shapes (an unknown or Lambda layer's outputs: a shape, or a list of shapes)."""
    try:
        return _Builder(model_file, batch, inputs or {}).run()
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RecursionError) as e:
        # a shape the config's own checks did not foresee: still one line, never a traceback
        raise InputError(f"the model config is malformed ({type(e).__name__}: {str(e)[:200]})",
                         file=model_file.path) from None


def _entry_name(entry):
    config = entry.get("config") if isinstance(entry, dict) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    if not isinstance(name, str) and isinstance(config, dict):
        name = config.get("name")
    return name if isinstance(name, str) else None


def _class(entry):
    name = entry.get("class_name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) else None


def _is_model(entry):
    return _class(entry) in MODELS and isinstance(entry.get("config"), (dict, list))


def _is_ref(value):
    return (isinstance(value, (list, tuple)) and len(value) >= 3 and isinstance(value[0], str)
            and isinstance(value[1], int) and isinstance(value[2], int))


def _unknown_axes(shape):
    """Whether an input's shape leaves an axis after the batch unknown (None, or not a positive size)."""
    return any(not isinstance(d, int) or d <= 0 for d in shape[1:])


class _Builder:
    def __init__(self, model_file, batch, declared):
        self.file = model_file
        self.declared = {name: self._shapes(name, value) for name, value in declared.items()}
        self.batch_arg = batch
        self.layers = {}  # id(entry) -> KerasLayer
        self.calls = {}  # id(entry) -> calls so far
        self.nodes, self.weights, self.gaps = [], [], []
        # a trial build (_input_shapes): the paths of the layers no rule reads, each passed its first input
        # as its output, and the shape of that input by name
        self.passed, self.probed = None, {}

    def error(self, message, layer=None, fix=None):
        return InputError(message, file=self.file.path, layer=layer, fix=fix)

    def _layers_of(self, entry):
        config = entry["config"]
        layers = config if isinstance(config, list) else config.get("layers")
        if not isinstance(layers, list) or not all(isinstance(e, dict) for e in layers):
            raise self.error(f"model '{_entry_name(entry)}' has no list of layers")
        return layers

    def _refs_list(self, value, what, model):
        """input_layers/output_layers: [[name, node, tensor], ...], or in Keras 3 one [name, node, tensor]
        or a dict of them (named inputs, in the dict's order)."""
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str):
            value = [value]
        if not isinstance(value, list) or not value or not all(_is_ref(r) for r in value):
            raise self.error(f"model '{model}' has no valid {what}")
        return [(r[0], r[1], r[2]) for r in value]

    def _shapes(self, name, value):
        shapes = value if isinstance(value, list) and value and isinstance(value[0], (list, tuple)) else [value]
        for shape in shapes:
            if not isinstance(shape, (list, tuple)) or not shape or \
                    not all(isinstance(d, int) and (d > 0 or (i == 0 and d in (-1,))) for i, d in enumerate(shape)):
                raise self.error(f"the shape declared for '{name}' is {value!r}, not positive ints, batch first")
        return [tuple(s) for s in shapes]

    # -- the model's inputs and batch ---------------------------------------------------------------
    def run(self):
        top = self.file.config
        root = _entry_name(top) or "model"
        inputs = self._inputs_of(top, root)
        fixed = [shape[0] for _, shape, _ in inputs if shape and isinstance(shape[0], int) and shape[0] > 0]
        if self.batch_arg is not None:
            if not isinstance(self.batch_arg, int) or self.batch_arg <= 0:
                raise self.error(f"batch {self.batch_arg!r} is not a positive int")
            self.batch, self.batch_from = self.batch_arg, "argument"
        elif fixed:
            self.batch, self.batch_from = fixed[0], "input"
        else:
            self.batch, self.batch_from = DEFAULT_BATCH, "default"
        self._all_at_once(top, root, inputs)
        tensors = []
        for name, shape, dtype in inputs:
            if _unknown_axes(shape):
                raise self.error(f"input '{name}' has shape {self._show(shape)}: every axis but the batch must be "
                                 "known", fix=f"declare it, e.g. --input {name}={self._example(shape)}")
            spec = Spec((self.batch,) + tuple(shape[1:]), dtype)
            self._check(spec, name)
            tensors.append(Tensor(name, spec, None))
        policy = policy_name(self._config(top).get("dtype"))
        outputs = self.expand(top, tensors, root, True, policy)
        listed = self._config(top).get("output_layers")
        names = [name for name, _, _ in self._refs_list(listed, "output_layers", root)] if listed else []
        return Graph(nodes=self.nodes, inputs=tensors, outputs=outputs, weights=self.weights, batch=self.batch,
                     batch_from=self.batch_from, flavour=self.file.flavour,
                     policy=policy or (self.nodes[0].layer.policy if self.nodes else "float32"), gaps=self.gaps,
                     output_names=names if len(names) == len(outputs) else [t.name for t in outputs])

    def _all_at_once(self, top, root, inputs):
        """Where more than one thing must be declared (inputs with unknown axes, layers whose code is
        never run or whose shape rule is not known), one refusal names them all, so one run says
        every --input the model needs."""
        unknown = [(name, shape) for name, shape, _ in inputs if _unknown_axes(shape)]
        layers = self._unreadable(top, root)
        if len(unknown) + len(layers) < 2:
            return  # the one refusal comes where the model is read, as it always has
        groups = {}
        for lpath, entry in layers:
            groups.setdefault(unreadable_kind(entry), []).append(lpath.split("/", 1)[-1])
        parts = [f"input '{name}' has shape {self._show(shape)}" for name, shape in unknown]
        if groups:
            what = "; ".join(f"{label} x{len(names)} ({', '.join(names)}): {why}"
                             for (label, why), names in groups.items())
            parts.append(f"{len(layers)} layer{'s' if len(layers) > 1 else ''} cannot be read here: {what}")
        seen = {} if unknown else self._input_shapes(top, root, inputs, [lpath for lpath, _ in layers])
        given = {lpath: self._as_given(seen[lpath]) if lpath in seen else f"{self.batch}x10" for lpath, _ in layers}
        examples = [f"--input {name}={self._example(shape)}" for name, shape in unknown] \
            + [f"--input {lpath.split('/', 1)[-1]}={given[lpath]}" for lpath, _ in layers]
        more = len(examples) - LISTED
        raise self.error(", and ".join(parts),
                         fix="declare each one's shape, batch first, an input's or a layer's output"
                             + (" (a layer's input shape is given, which a layer that keeps its input's shape has)"
                                if seen else "") + ": "
                             + " ".join(examples[:LISTED]) + (f" ... ({more} more)" if more > 0 else ""))

    def _input_shapes(self, top, root, inputs, paths):
        """{path: the shape of its first input} of the layers at `paths`, from a trial build in which each
        passes that input on as its output; {} where that build stops on anything else."""
        trial = _Builder(self.file, self.batch, {})
        trial.declared, trial.passed = self.declared, set(paths)
        try:
            tensors = [Tensor(name, Spec((self.batch,) + tuple(shape[1:]), dtype), None)
                       for name, shape, dtype in inputs]
            trial.expand(top, tensors, root, True, policy_name(self._config(top).get("dtype")))
        except (InputError, KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RecursionError):
            return {}
        return trial.probed

    def _unreadable(self, entry, path, depth=0):
        """[(path, entry)] of the layers no rule reads (custom classes, Lambda, unknown operations and
        TensorFlow functions) and whose outputs are not declared, in the config's order."""
        try:
            layers = self._layers_of(entry)
        except InputError:
            return []  # refused, in its own words, where it is read
        out = []
        for layer in layers:
            name, cls = _entry_name(layer), _class(layer)
            if name is None or cls is None or cls == "InputLayer":
                continue
            lpath = f"{path}/{name}"
            if _is_model(layer):
                if depth < MAX_DEPTH:
                    out += self._unreadable(layer, lpath, depth + 1)
            elif not self._declared(name, lpath) and isinstance(layer.get("config"), dict) and (
                    layer_class(layer) is None
                    or cls == "TFOpLambda" and layer["config"].get("function") not in ELEMENTWISE_TF):
                out.append((lpath, layer))
        return out

    def _example(self, shape):
        """An --input value for this shape: the audit's batch, the known axes as they are, a letter
        for each unknown one (H and W for an image's)."""
        image = len(shape) == 4 and not all(isinstance(d, int) and d > 0 for d in shape[1:3])
        axes = [str(d) if isinstance(d, int) and d > 0 else ("H", "W")[k - 1] if image and k in (1, 2) else f"D{k}"
                for k, d in enumerate(shape) if k]
        return "x".join([str(self.batch)] + axes)

    @staticmethod
    def _show(shape):
        return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"

    @staticmethod
    def _config(entry):
        config = entry.get("config")
        return config if isinstance(config, dict) else {}

    def _inputs_of(self, entry, path):
        """[(name, shape with None where unknown, dtype)] of a model's inputs."""
        if path.count("/") >= MAX_DEPTH:
            raise self.error(f"models nest over {MAX_DEPTH} deep", layer=path)
        layers = self._layers_of(entry)
        if entry["class_name"] == "Sequential":
            if not layers:
                raise self.error(f"model '{path}' has no layers")
            first = layers[0]
            if _class(first) != "InputLayer" and _is_model(first):
                return self._inputs_of(first, f"{path}/{_entry_name(first)}")
            config = self._config(first)
            shape = self._input_shape(config) or self._input_shape(self._config(entry), "build_input_shape") \
                or self._input_shape(entry.get("build_config") or {}, "input_shape") \
                or self._input_shape(first.get("build_config") or {}, "input_shape")
            name = _entry_name(first) if _class(first) == "InputLayer" else f"{_entry_name(first)}_input"
            return [self._input(name, shape, config, path)]
        by_name = {_entry_name(e): e for e in layers}
        out = []
        for name, _, _ in self._refs_list(self._config(entry).get("input_layers"), "input_layers", path):
            layer = by_name.get(name)
            if layer is None or _class(layer) != "InputLayer":
                raise self.error(f"model '{path}' lists input '{name}', which is not one of its InputLayers")
            config = self._config(layer)
            out.append(self._input(name, self._input_shape(config), config, path))
        return out

    @staticmethod
    def _input_shape(config, *keys):
        for key in keys or ("batch_shape", "batch_input_shape"):
            shape = config.get(key)
            if isinstance(shape, list) and shape:
                return shape
        return None

    def _input(self, name, shape, config, path):
        if name in self.declared:
            shape = list(self.declared[name][0])
            if shape[0] == -1:
                shape[0] = None
        if shape is None:
            raise self.error(f"model '{path}' does not say its input's shape",
                             fix=f"declare it, e.g. --input {name}=32x...")
        dtype = policy_name(config.get("dtype")) or "float32"
        return name, shape, "float32" if dtype.startswith("mixed_") else dtype  # a mixed layer's variable dtype

    # -- models -------------------------------------------------------------------------------------
    def expand(self, entry, tensors, path, trainable, policy):
        """The output tensors of one call of a model on `tensors`, its layers' nodes appended."""
        if path.count("/") >= MAX_DEPTH:
            raise self.error(f"models nest over {MAX_DEPTH} deep", layer=path)
        config = self._config(entry)
        trainable = trainable and config.get("trainable", True) is not False
        policy = policy_name(config.get("dtype")) or policy
        layers = self._layers_of(entry)
        if entry["class_name"] == "Sequential":
            for layer in layers:
                if _class(layer) != "InputLayer":
                    tensors = self.call(layer, tensors, path, trainable, policy)
            return tensors
        return self._functional(entry, layers, tensors, path, trainable, policy)

    def _functional(self, entry, layers, tensors, path, trainable, policy):
        config = self._config(entry)
        index = {}
        for i, layer in enumerate(layers):
            name = _entry_name(layer)
            if name is None or name in index:
                raise self.error(f"model '{path}' has a layer with {'no' if name is None else 'a repeated'} name"
                                 + (f" '{name}'" if name else ""))
            index[name] = i
        inputs = self._refs_list(config.get("input_layers"), "input_layers", path)
        if len(inputs) != len(tensors):
            raise self.error(f"model '{path}' takes {len(inputs)} inputs, called with {len(tensors)}")
        made = {(name, 0): [t] for (name, _, _), t in zip(inputs, tensors)}
        calls = {}  # (layer index, call index) -> (data refs, all producing calls)
        for i, layer in enumerate(layers):
            if _class(layer) == "InputLayer":
                continue
            nodes = layer.get("inbound_nodes")
            if not isinstance(nodes, list) or not nodes:
                raise self.error("has no inbound_nodes: it is not connected to the model",
                                 layer=f"{path}/{_entry_name(layer)}")
            for j, node in enumerate(nodes):
                data, other, options = self._node_refs(node, index, f"{path}/{_entry_name(layer)}")
                deps = set()
                for name, k, _ in data + other:
                    if name not in index:
                        raise self.error(f"takes its input from '{name}', which is not a layer of the model",
                                         layer=f"{path}/{_entry_name(layer)}")
                    producer = layers[index[name]]
                    first = self._first_node(producer)
                    count = 1 if _class(producer) == "InputLayer" \
                        else len(producer.get("inbound_nodes") or ())
                    if not first <= k < first + count:
                        raise self.error(f"takes call {k - first} of '{name}', which is called {count} times",
                                         layer=f"{path}/{_entry_name(layer)}")
                    if _class(producer) == "InputLayer":
                        if (name, 0) not in made:
                            raise self.error(f"takes input '{name}', which is not in the model's input_layers",
                                             layer=f"{path}/{_entry_name(layer)}")
                    else:
                        deps.add((index[name], k - first))
                calls[(i, j)] = (data, deps, options)
        waiting = {key: len(deps) for key, (_, deps, _) in calls.items()}
        users = {}
        for key, (_, deps, _) in calls.items():
            for dep in deps:
                users.setdefault(dep, []).append(key)
        ready = [key for key, n in waiting.items() if n == 0]
        heapq.heapify(ready)
        done = 0
        while ready:
            i, j = heapq.heappop(ready)
            layer = layers[i]
            lpath = f"{path}/{_entry_name(layer)}"
            args = []
            for name, k, t in calls[(i, j)][0]:
                outs = made[(name, k - self._first_node(layers[index[name]]))]
                if not 0 <= t < len(outs):
                    raise self.error(f"takes output {t} of '{name}', which has {len(outs)}", layer=lpath)
                args.append(outs[t])
            made[(_entry_name(layer), j)] = self.call(layer, args, path, trainable, policy, calls[(i, j)][2])
            done += 1
            for user in users.get((i, j), ()):
                waiting[user] -= 1
                if waiting[user] == 0:
                    heapq.heappush(ready, user)
        if done < len(calls):
            stuck = min(key for key, n in waiting.items() if n)
            raise self.error("its inbound_nodes form a cycle (a layer's input depends on its own output)",
                             layer=f"{path}/{_entry_name(layers[stuck[0]])}")
        outputs = []
        for name, k, t in self._refs_list(config.get("output_layers"), "output_layers", path):
            outs = made.get((name, k - self._first_node(layers[index[name]], output=True))) if name in index else None
            if outs is None or not 0 <= t < len(outs):
                raise self.error(f"model '{path}' lists output ['{name}', {k}, {t}], which no layer call makes")
            outputs.append(outs[t])
        return outputs

    def _first_node(self, entry, output=False):
        """The node index of a layer's first call in the config: a nested Functional model (and a
        Sequential built on its own input) keeps node 0 for its own input-to-output node. Keras 3
        counts it only in `output_layers` (functional.py get_config's node_reindexing_map); a layer's
        inbound_nodes leave out every node of another model (serialize_node), so there its first call
        is node 0."""
        if not _is_model(entry) or _class(entry) == "InputLayer":
            return 0
        if self.file.flavour == "keras3":
            return int(output and entry["class_name"] != "Sequential")
        if entry["class_name"] != "Sequential":
            return 1
        layers = self._layers_of(entry)
        if not layers:
            return 0
        first = layers[0].get("config") if isinstance(layers[0].get("config"), dict) else {}
        # built on its own input: an InputLayer, or (Keras 2.0-2.2, tf.keras 2.2.4-tf, TensorFlow.js) the
        # first layer's input shape, from which Keras made the model's own node (Keras 2.2's network.py
        # get_config: kept_nodes = 1 for every nested Network; tf_keras's _should_skip_first_node)
        return int(_class(layers[0]) == "InputLayer"
                   or any(first.get(key) for key in ("batch_input_shape", "input_shape", "batch_shape")))

    def _node_refs(self, node, index, lpath):
        """(data refs in call order, other refs, the call's constant keyword arguments) of one inbound
        node, in either format."""
        data, other = [], []

        def walk(value, into):
            if isinstance(value, dict):
                if _class(value) == "__keras_tensor__":
                    history = self._config(value).get("keras_history")
                    if not _is_ref(history):
                        raise self.error("has a malformed keras_history in its inbound_nodes", layer=lpath)
                    into.append(tuple(history[:3]))
                    return
                for key, item in value.items():
                    walk(item, other if key in NOT_DATA else into)
            elif _is_ref(value) and len(value) == 3 and value[0] in index:
                into.append(tuple(value))  # Keras 2 writes a tensor in kwargs as [name, node, tensor]
            elif isinstance(value, (list, tuple)):
                for item in value:
                    walk(item, into)

        kwargs = {}
        if isinstance(node, dict) and ("args" in node or "kwargs" in node):
            walk(node.get("args") or [], data)
            walk(node.get("kwargs") or {}, data)
            kwargs = node.get("kwargs")
        elif isinstance(node, list):  # Keras 2: [[name, node, tensor, {kwargs}], ...]
            if _is_ref(node):  # a TFOpLambda keeps its call's structure: one argument is the node itself
                node = [node]
            for item in node:
                if not _is_ref(item):
                    raise self.error("has a malformed inbound node", layer=lpath)
                data.append(tuple(item[:3]))
                if len(item) > 3:
                    walk(item[3], data)
                    kwargs = kwargs or item[3]
        else:
            raise self.error("has a malformed inbound node", layer=lpath)
        if not data:
            raise self.error("has an inbound node that names no input tensor", layer=lpath)
        options = {k: v for k, v in kwargs.items() if isinstance(v, (bool, int, float, str))} \
            if isinstance(kwargs, dict) else {}
        return data, other, options

    # -- layers -------------------------------------------------------------------------------------
    def call(self, entry, tensors, path, trainable, policy, options=None):
        name = _entry_name(entry)
        if _class(entry) is None:
            raise self.error(f"model '{path}' has a layer with no class_name"
                             + (f" (named '{name}')" if name is not None else ""))
        if name is None:
            raise self.error(f"model '{path}' has a {_class(entry)} layer with no name")
        lpath = f"{path}/{name}"
        if _is_model(entry):
            return self.expand(entry, tensors, lpath, trainable, policy)
        key = id(entry)
        layer = self.layers.get(key)
        if layer is None:
            try:
                layer = self._make(entry, name, lpath, trainable, policy)
            except InputError as e:
                if tensors and layer_class(entry) is None:  # its input's shape: what a layer keeping it outputs
                    e.fix = f"declare its output shape, e.g. --input {name}={self._as_given(tensors[0].spec.shape)}" \
                            " if it keeps its input's shape"
                raise
            self.layers[key] = layer
        call_index = self.calls.get(key, 0)
        self.calls[key] = call_index + 1
        specs = [t.spec for t in tensors]
        try:
            if call_index == 0:
                for weight in layer.weights(specs):
                    self._check(weight, lpath)
                    self.weights.append((layer, weight))
            declared = self._declared(name, lpath)
            if declared:
                outs = [Spec((self.batch,) + s[1:], layer.compute_dtype) for s in declared]
            elif self.passed is not None and lpath in self.passed and specs:
                self.probed.setdefault(lpath, specs[0].shape)
                outs = [specs[0]]
            else:
                layer.call_options = options or {}
                outs = layer.output_specs(specs)
        except InputError as e:
            raise e.located(file=self.file.path, layer=lpath)
        except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError, OverflowError) as e:
            raise self.error(f"its config does not fit its {layer.class_name} inputs "
                             f"{[s.shape for s in specs]} ({type(e).__name__}: {e})", layer=lpath) from None
        for spec in outs:
            self._check(spec, lpath)
        node = Node(layer, list(tensors), [], lpath, call_index)
        node.outputs = [Tensor(lpath if (call_index, k) == (0, 0) else f"{lpath}:{call_index}:{k}", spec, node)
                        for k, spec in enumerate(outs)]
        self.nodes.append(node)
        return node.outputs

    @staticmethod
    def _as_given(shape):
        """A shape as --input writes it: 32x56x56x96."""
        return "x".join(str(d) for d in shape)

    def _declared(self, name, lpath):
        """Declared output shapes of a layer, by its name or its path without the model's."""
        return self.declared.get(name) or self.declared.get(lpath.split("/", 1)[-1])

    def _make(self, entry, name, lpath, trainable, policy):
        if not isinstance(entry.get("config"), dict):
            raise self.error("has no config", layer=lpath)
        passed = self.passed is not None and lpath in self.passed
        if self._declared(name, lpath) or passed:
            self.gaps.append(lpath)
            if layer_class(entry) is None:  # unknown or never run: outputs declared, no weights known
                return KerasLayer(entry["class_name"], entry["config"], trainable=trainable, policy=policy,
                                  flavour=self.file.flavour, path=lpath)
        try:
            return make_layer(entry, trainable=trainable, policy=policy, flavour=self.file.flavour, path=lpath)
        except InputError as e:
            raise e.located(file=self.file.path, layer=lpath)

    def _check(self, spec, where):
        """Every dimension a positive int and the whole under 2**40 elements."""
        if not all(isinstance(d, int) and d > 0 for d in spec.shape):
            raise self.error(f"gets shape {self._show(spec.shape)}: every dimension must be a positive int",
                             layer=where)
        if elements(spec.shape) > MAX_ELEMENTS:
            raise self.error(f"gets shape {spec.shape}, over 2**40 elements: not a model that can be trained",
                             layer=where)
