"""Explain: turn recorded intermediates into walkthroughs, print them, check hand-worked examples."""
