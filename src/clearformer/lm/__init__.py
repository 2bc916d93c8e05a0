"""The decoder-only language model around model/lm.py: its corpus, training loop and explain view."""
