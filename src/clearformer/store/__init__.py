"""Run folders and files: checkpoints, locks, LATEST, atomic writes, bounded reading, the cache folder."""
