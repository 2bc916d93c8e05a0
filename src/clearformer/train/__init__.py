"""Training: the paper's recipe (label smoothing, Adam + warmup, clipping, accumulation), validation,
early stopping, atomic resumable checkpoints, DDP. `train(TrainOptions(...))` runs it."""

from clearformer.train.loop import TrainResult, resume_options, train
from clearformer.train.options import TrainOptions

__all__ = ["TrainOptions", "TrainResult", "resume_options", "train"]
