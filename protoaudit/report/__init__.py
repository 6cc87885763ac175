"""Step 5: reports. Formatting only (text, markdown, JSON, CSV, charts, Caffe's own log lines):
every figure they show is computed in protoaudit.memory."""
