"""Which translations to review: a confidence in [0, 1] per translation and per word (issue 53).

evidence.py (one forced pass: log-probabilities, cross-attention, the logit lens, the empty-source prior) ->
features.py (Bergamot's word features, the baseline; the white box's sentence features) -> estimator.py (the
fitted logistic regression saved with the run, JSON) -> estimate.py (per piece, per input, per word).
"""
