"""The tutorials' claims about the Transformer, each run as an experiment on the modules that train.

`registry.CLAIMS` lists them; each claim module has `run(quick=...) -> dict`, `summary(results)
-> lines` and `figure(results) -> matplotlib Figure`. `clearformer claims` runs them.
"""
