"""Explain: turn recorded intermediates into walkthroughs, print them, check hand-worked examples."""

from clearformer.explain.walkthrough import Walkthrough


def _walkthrough_html(walk: Walkthrough) -> str:
    from clearformer.explain.html import notebook_html  # the page's own code, loaded when Jupyter asks

    return notebook_html(walk)


# Jupyter shows a Walkthrough as the page of `explain --html` (explain/html.py), inline and offline.
# Attached here rather than in walkthrough.py, which the page's code imports (no import cycle).
Walkthrough._repr_html_ = _walkthrough_html
