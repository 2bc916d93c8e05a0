"""Training: the paper's recipe (label smoothing, Adam + warmup, clipping, accumulation), validation,
early stopping, atomic resumable checkpoints, DDP. `train(TrainOptions(...))` runs it, `train(LMOptions(...))`
a language model's (train/front.py, the one front)."""

from clearformer.train.front import resume_options, train
from clearformer.train.loop import TrainResult
from clearformer.train.options import TrainOptions

__all__ = ["TrainOptions", "TrainResult", "resume_options", "train"]
