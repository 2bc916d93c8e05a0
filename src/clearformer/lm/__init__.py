"""The decoder-only language model around model/lm.py: its corpus (data), training loop (training), explain view (explain)."""
