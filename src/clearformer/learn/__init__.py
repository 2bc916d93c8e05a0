"""Learn the Transformer by doing it: `clearformer learn` (docs/learn.md).

    lessons.py    the 15 lessons in the seeds' order: concept, snippet, question, page steps (one source)
    snippets.py   runs a lesson's snippet and captures what it prints
    questions.py  questions read off a recorded step, and their checks
    toy.py        the trained toy model the learner's sentence is recorded with (trained on first use)
    present.py    a lesson as terminal text;  session.py  a lesson in Python (the notebooks)
    notebooks.py  one notebook per lesson, generated;  page.py  the lessons beside the page's steps
    exercises.py  starter files;  cases.py  the cases;  reference.py  clearformer's modules they are checked
                  against;  check.py  import and compare a learner's file;  diagnose.py  what differs, in words
    sandbox.py    the learner's code in a child process (time, memory, file size);  child.py  that process
    solutions.py  worked solutions;  extras.py  lesson 12's beam table and lesson 14's MLA latent
    capstone_source.py  lesson 15's Transformer file and its skeleton;  capstone.py  its check and training (in
                  the child), the mapping of names;  capstone_run.py  the commands' side
"""
