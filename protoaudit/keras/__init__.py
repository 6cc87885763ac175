"""Keras's front end: read a saved model's config (files), know each built-in layer's shapes and
variables (layers), and lay the model out as a graph of calls (graph) for the memory model.
Never imports TensorFlow or Keras, and never runs code from a file."""
