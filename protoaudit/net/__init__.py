"""Step 2: building the net as Caffe's Net::Init does: the NetState's layers, Split layers, blobs,
shapes, parameters and which layers run backward (and --freeze, an edit made before building)."""
