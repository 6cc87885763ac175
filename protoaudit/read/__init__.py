"""Step 1: reading Caffe's files. Text through the compiled schemas (BVLC or a fork), V0/V1 nets
upgraded to V2, and a solver's nets found; what comes out is the NetParameter Caffe would build."""
