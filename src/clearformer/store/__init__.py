"""The ground floor: run folders and files (checkpoint files, locks, LATEST, atomic writes, bounded reading, the
cache folder). It imports nothing of clearformer but errors and limits; `clearformer.load` reads a run back."""
