"""What one TensorFlow training step of a Keras model holds: the ops each layer runs, what each op's
registered gradient keeps, the optimizer's slots and updates, in the order TensorFlow runs them,
written as a program of buffers with lifetimes (protoaudit.memory.timeline)."""
