"""Explain: turn recorded intermediates into walkthroughs, print them, check hand-worked examples."""

from clearformer.explain.html import notebook_html
from clearformer.explain.walkthrough import Walkthrough

# Jupyter shows a Walkthrough as the page of `explain --html` (explain/html.py), inline and offline.
# Attached here rather than in walkthrough.py, which the page's code imports (no import cycle).
Walkthrough._repr_html_ = notebook_html
