"""A part of the course after the lessons: "why did it say that", on the learner's own sentence.

The lessons show what the Transformer computes; this part asks why it chose its words, with the three tools
of `clearformer.explain.why` on the toy model (`learn/toy.py`): the logit lens (what each decoder layer would
say), activation patching (which layer, position or head carries a word from the source into the translation)
and attribution (which source words drive each target word). `clearformer learn --notebooks DIR` writes its
notebook beside the lessons' (notebooks/why-did-it-say-that.ipynb).
"""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from clearformer.explain.why import attribute_report, lens_report, patch_report
from clearformer.learn.toy import ensure_toy_model
from clearformer.load import load_decoding_facts, load_model

TITLE = "Why did it say that?"
NOTEBOOK = "why-did-it-say-that.ipynb"
SENTENCE, CORRUPTED = "She does not love you", "She does not love me"
CONCEPT = (
    "Every recorded name (`encoder.layers.1.output`, `decoder.layers.0.cross_attention.head_outputs`, ...) is a "
    "hook point: the recorder reads it, a hook may replace it while it flows (`trace.Hooks`; `--ablate` is such a "
    "write). Three questions use that. The **logit lens** sends each decoder layer's output through the final "
    "projection: at which layer does the model already know its word? **Activation patching** translates a "
    "clean and a corrupted sentence (one word changed) and copies one point of the clean run into the corrupted "
    "one: the share of the clean translation's log-probability it restores says where the changed word's "
    "information travels. **Attribution** scores each source word for each target word: integrated gradients "
    "add up to how far the output moved from a baseline (completeness), and their strongest links are word "
    "alignments, to compare with the cross-attention weights.")


def why_on_sentence(sentence: str = SENTENCE, corrupted: str = CORRUPTED, checkpoint=None) -> dict:
    """The three reports on the toy model (trained first if missing): {"lens", "patch", "attribute"}."""
    run = ensure_toy_model(checkpoint)
    model, tokenizer, _ = load_model(run)
    facts = load_decoding_facts(run, tokenizer)
    return {"lens": lens_report(model, tokenizer, sentence, facts=facts),
            "patch": patch_report(model, tokenizer, sentence, corrupted, facts),
            "attribute": attribute_report(model, tokenizer, sentence, facts=facts)}


SNIPPET = '''from clearformer.learn.why import why_on_sentence

why = why_on_sentence(SENTENCE, CORRUPTED)
print("translation:", why["lens"]["result"])
for step in why["lens"]["steps"]:  # the logit lens: each layer's top token, and p(the word chosen)
    print(f"{step['chosen']:>8}:", "  ".join(f"layer {x['layer']} {x['top']} ({x['p_chosen']:.2f})"
                                          for x in step["layers"]))
best = sorted(why["patch"]["points"], key=lambda p: -p["restored"])[:6]
print("patching, the points that restore most:", *(f"{p['name']} {p['restored']:.3f}" for p in best), sep="\\n  ")
attribution = why["attribute"]
print("alignments (source-target):", " ".join(attribution["alignments"]))
print("completeness:", attribution["completeness"]["sum"], "vs", attribution["completeness"]["difference"])
'''


def build_why_notebook() -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell(f"# {TITLE}\n\n{CONCEPT}\n\n*Generated from `src/clearformer/learn/why.py` by "
                          "`clearformer learn --notebooks notebooks`; in the terminal: `clearformer lens`, "
                          "`clearformer patch`, `clearformer attribute` (docs/why.md).*"),
        new_markdown_cell("## On your sentence\n\nChange the sentence (and the corrupted one: the same sentence "
                          "with one word changed, as many tokens) and run the cell again. The toy model "
                          "(the cache's `toy-translate/`, learn/toy.py) is trained once if it is missing."),
        new_code_cell(f"SENTENCE = {SENTENCE!r}\nCORRUPTED = {CORRUPTED!r}\n\n" + SNIPPET.rstrip("\n")),
        new_markdown_cell("## Questions\n\nWhich layer of the lens first chooses each word? Which encoder position "
                          "restores the most when patched, and is it the word you changed? Do the attribution's "
                          "alignments agree with the cross-attention (`attribute_report(..., method='attention')`)?"),
    ]
    for index, cell in enumerate(cells):
        cell["id"] = f"why-{index}"
    return new_notebook(cells=cells, metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                              "name": "python3"},
                                               "language_info": {"name": "python"}})


def why_notebook_text() -> str:
    return nbformat.writes(build_why_notebook())
