"""Step 4: what the built nets allocate, held at once: each buffer a layer touches (step 3,
protoaudit.layers), the solver's state, the totals, whether they fit a card, and why two nets differ."""
