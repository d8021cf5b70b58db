"""Sparse autoencoders (SAEs) of our base models' residual streams, trained here: ``model`` (the TopK
SAE in plain torch, its SAELens-layout files and the hash-checked loader), ``activations`` (token
contexts from a corpus, one layer harvested, the shuffle buffer), ``train`` (the seeded trainer) and
``card`` (L0, FVE, dead latents and the loss recovered, on held-out text); re-exports nothing."""
