"""What is said about a model, from the model or its config: the `info` line, the parameters by part, the
decoding cache's size, and the one count of training FLOPs that MFU divides by.

Above model/ (it reads models and configs), below train/, commands/, explain/ and learn/ (which report):
model/ holds the paper's modules and nothing about them.

    model.py   summary(config), parameter_breakdown(model), kv_cache_bytes(config), describe(model, ...)
    flops.py   FlopCount.of(model): training FLOPs of a batch, one formula for every architecture
"""
