"""Placeholders masked before the model and restored after (issue 30): before against after, measured.

Three steps, each its own command, so that the "before" run is evaluated by the code that trained it
(main at 05b944e, PYTHONPATH pointing at its src) and the "after" run by this branch:

    python -m benchmarks.placeholders heldout --out /tmp/ph/heldout        # messages of 15 packages outside the recipe
    PYTHONPATH=/tmp/ph-base/src python -m benchmarks.placeholders evaluate --run runs/before --label before \\
        --test data/en-fr-software/test.tsv --heldout /tmp/ph/heldout/heldout.tsv --out before.json
    python -m benchmarks.placeholders evaluate --run runs/after --label after ... --out after.json
    python -m benchmarks.placeholders report before.json after.json      # writes the BENCHMARKS.md section

`heldout` reads the French catalogues of Debian packages that `data/software.py` does not use, with the
recipe's own code (`software.package_pairs`: the same cleaning), drops any source the corpus already
holds, and keeps up to 30 messages with a placeholder per package (the first by SHA-256 of the
source: a fixed, unbiased sample).

`evaluate` decodes as `clearformer translate` does (long inputs cut into sentences, beam 4, the
defaults of the code that runs it) but keeps each piece's token ids, to count the translations
that run to their length limit and those that end there in one piece repeated (runaway: the last
4 or more pieces the same).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import torch

HELDOUT_PACKAGES = ("dpkg", "coreutils", "tar", "apt", "bash", "cpio", "diffutils", "e2fsprogs-l10n", "findutils",
                    "gawk", "grep", "make", "sed", "wget", "xz-utils")
PER_PACKAGE = 30
RUNAWAY_RUN = 4  # a translation at its length limit whose last 4+ pieces are one piece repeated
# Messages with unusual placeholders shown in the section: dpkg's (issue 30's examples), coreutils',
# evolution's (test split), and a reordering one written for the check (the corpus has no %1$s/%2$s pair
# that French swaps).
UNUSUAL = (
    ("unable to read link '%.255s'", "impossible de lire le lien « %.255s »"),
    ("symbolic link '%.250s' size has changed from %jd to %zd",
     "la taille du lien symbolique '%.250s' est passée de %jd à %zd"),
    ("ar member time %jd too large", "la date du membre ar %jd est trop grande"),
    ("Optional negative values (%-10f) will left align.",
     "Les valeurs négatives facultatives (%-10f) aligneront la sortie à gauche."),
    ("Really delete folder “{0}”?", "Voulez-vous vraiment supprimer le dossier « {0} » ?"),
    ("The %1$s of user %2$s could not be read", "Le %1$s de l'utilisateur %2$s n'a pas pu être lu"),
)


def build_heldout(out: Path, downloads: Path, recipe: Path, per_package: int = PER_PACKAGE) -> None:
    """heldout.tsv and manifest.json in `out`: messages with placeholders from HELDOUT_PACKAGES."""
    from clearformer.data.corpus import tsv_line
    from clearformer.data.deb import apt_download
    from clearformer.data.software import PACKAGES, package_pairs
    from clearformer.tokenize.placeholders import find

    assert not set(HELDOUT_PACKAGES) & set(PACKAGES), "a held-out package is in the recipe"
    known = set()
    for split in ("train", "valid", "test"):
        for line in (recipe / f"{split}.tsv").read_text(encoding="utf-8").splitlines():
            known.add(line.split("\t")[0])
    debs = apt_download(list(HELDOUT_PACKAGES), downloads, print)
    pairs, manifest = [], []
    for name in HELDOUT_PACKAGES:
        if name not in debs:
            print(f"warning: {name} unavailable", file=sys.stderr)
            continue
        package, entry = package_pairs(debs[name], Counter())
        fresh = [p for p in dict.fromkeys(package) if p[0] not in known and find(p[0])]
        chosen = sorted(fresh, key=lambda p: hashlib.sha256(p[0].encode("utf-8")).hexdigest())[:per_package]
        known.update(s for s, _ in chosen)
        pairs.extend(chosen)
        manifest.append({"package": entry["package"], "version": entry["version"], "sha256": entry["sha256"],
                         "with_placeholders": len(fresh), "kept": len(chosen)})
        print(f"  {name} {entry['version']}: {len(fresh)} new messages with placeholders, {len(chosen)} kept")
    out.mkdir(parents=True, exist_ok=True)
    (out / "heldout.tsv").write_text("".join(tsv_line(s, t) for s, t in pairs), encoding="utf-8")
    (out / "manifest.json").write_text(json.dumps({"packages": manifest, "pairs": len(pairs)}, indent=1) + "\n",
                                       encoding="utf-8")
    print(f"{len(pairs)} pairs in {out / 'heldout.tsv'}")


def read_tsv(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t")[:2]) for line in path.read_text(encoding="utf-8").splitlines() if "\t" in line]


def decode_set(model, tokenizer, pairs, beam: int, repeats: str | None, facts=None) -> dict:
    """Translate the sources of `pairs` as `translate` does, keeping ids; score and count runaways."""
    from clearformer.evaluate import score_corpus
    from clearformer.generate.options import DecodingOptions, search_tokens
    from clearformer.generate.source import prepare_sources
    from clearformer.generate.state import max_new_tokens
    from clearformer.generate.translator import decode_ids, join_pieces, pad_batch
    from clearformer.tokenize import encode_source

    try:  # this branch: masking and its pair; main at 05b944e has neither (nothing is masked)
        from clearformer.tokenize import mask_placeholders, restore_placeholders
    except ImportError:
        def mask_placeholders(tokenizer, text):
            return text

        def restore_placeholders(masked, translation):
            return translation
    extra = {} if repeats is None else {"repeats": repeats}
    options = DecodingOptions(beam=beam, **extra).check().but(with_scores=False)
    # the run's facts (its length ratio, limit and shortlist), as translate decodes; an earlier tree has none
    tokens = search_tokens(model, tokenizer, options) if facts is None else \
        search_tokens(model, tokenizer, options, facts=facts)
    max_len = model.config.max_len
    sources = [s for s, _ in pairs]
    read = prepare_sources(tokenizer, sources, max_len, check=False)
    pieces, owners = read.texts, read.owners
    ids = [encode_source(tokenizer, p)[:max_len] for p in pieces]
    outputs: list[list[int]] = [[] for _ in pieces]
    limits = [0] * len(pieces)
    order = sorted(range(len(pieces)), key=lambda i: -len(ids[i]))
    for start in range(0, len(order), 32):
        chunk = [i for i in order[start:start + 32] if ids[i]]
        if not chunk:
            continue
        src = pad_batch([ids[i] for i in chunk], tokens.pad_id)
        chunk_limits = max_new_tokens(src, tokens, options, max_len).tolist()
        for i, out, limit in zip(chunk, decode_ids(model, src, options, tokens), chunk_limits, strict=True):
            outputs[i], limits[i] = out, limit
    texts = [restore_placeholders(mask_placeholders(tokenizer, p), tokenizer.decode(o)) for p, o in zip(pieces, outputs,
                                                                                                      strict=True)]
    hypotheses = join_pieces(texts, owners, len(sources))
    at_limit = [i for i, o in enumerate(outputs) if limits[i] and len(o) >= limits[i]]
    runaway = [i for i in at_limit if len(outputs[i]) >= RUNAWAY_RUN and len(set(outputs[i][-RUNAWAY_RUN:])) == 1]
    result = score_corpus(hypotheses, [t for _, t in pairs], sources)
    return {"sentences": len(pairs), "pieces": len(pieces), "bleu": result.bleu, "chrf": result.chrf,
            "bleu_line": result.bleu_line, "ratio": result.ratio,
            "placeholders_kept": result.placeholders.kept, "placeholders_total": result.placeholders.total,
            "at_limit": len(at_limit), "runaway": len(runaway),
            "runaway_examples": [[pieces[i], texts[i][-120:]] for i in runaway[:3]],
            "hypotheses": hypotheses}


def evaluate(args: argparse.Namespace) -> None:
    from clearformer.load import load_model

    torch.set_num_threads(args.threads)
    model, tokenizer, _ = load_model(args.run)
    try:  # decoding.json (issue 47); an earlier tree read its facts from the tokenizer
        from clearformer.load import load_decoding_facts
        facts = load_decoding_facts(args.run, tokenizer)
    except ImportError:
        facts = None
    model.eval()
    result = {"label": args.label, "run": str(args.run), "beam": args.beam, "repeats": args.repeats,
              "mask_placeholders": bool(tokenizer.mask_placeholders), "sets": {}}
    for name, path in (("unusual", None), ("test", args.test), ("heldout", args.heldout)):
        pairs = list(UNUSUAL) if path is None else read_tsv(Path(path))[: args.limit or None]
        result["sets"][name] = decode_set(model, tokenizer, pairs, args.beam, args.repeats, facts)
        result["sets"][name]["sources"] = [s for s, _ in pairs]
        result["sets"][name]["references"] = [t for _, t in pairs]
        summary = {k: v for k, v in result["sets"][name].items() if k not in ("hypotheses", "sources", "references")}
        print(name, json.dumps(summary, ensure_ascii=False), flush=True)
    Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def kept(sources: list[str], hypotheses: list[str]) -> tuple[str, str]:
    """The share of sentences with placeholders that kept them, two ways: `find`'s multisets alike, and
    `same_placeholders` (`clearformer evaluate`'s share)."""
    from clearformer.tokenize.placeholders import find, same_placeholders

    pairs = [(s, h) for s, h in zip(sources, hypotheses, strict=True) if find(s)]
    multiset = sum(Counter(find(s)) == Counter(find(h)) for s, h in pairs)
    counted = sum(same_placeholders(s, h) for s, h in pairs)
    return tuple(f"{100 * n / len(pairs):.1f}% ({n}/{len(pairs)})" if pairs else "-" for n in (multiset, counted))


def ending_in_repeats(run: str, hypotheses: list[str]) -> int:
    """Translations whose last RUNAWAY_RUN pieces (re-tokenized by the run's tokenizer, placeholders masked
    where it masks) are one piece repeated, at the length limit or not."""
    from clearformer.tokenize import load_tokenizer, mask_placeholders

    tokenizer = load_tokenizer(run)
    count = 0
    for text in hypotheses:
        pieces = tokenizer.tokenize(mask_placeholders(tokenizer, text).text)
        count += len(pieces) >= RUNAWAY_RUN and len(set(pieces[-RUNAWAY_RUN:])) == 1
    return count


def row(result: dict, name: str) -> list:
    s = result["sets"][name]
    return [result["label"], name, s["sentences"], *kept(s["sources"], s["hypotheses"]), f"{s['bleu']:.2f}",
            f"{s['chrf']:.2f}", f"{s['ratio']:.3f}", s["runaway"], s["at_limit"],
            ending_in_repeats(result["run"], s["hypotheses"])]


def unusual_examples(results: list[dict]) -> list[str]:
    """The UNUSUAL messages with each result's translation (beam 4)."""
    lines = []
    for index, (source, reference) in enumerate(UNUSUAL):
        lines.append(f"- `{source}`")
        lines.append(f"  - reference: `{reference}`")
        for result in results:
            lines.append(f"  - {result['label']}: `{result['sets']['unusual']['hypotheses'][index]}`")
    return lines


def report(args: argparse.Namespace) -> None:
    # Imported here: `evaluate` also runs under the code before masking, which report.py's imports outgrew.
    from benchmarks.report import markdown_table, write_section

    results = [json.loads(Path(p).read_text(encoding="utf-8")) for p in args.results]
    rows = [row(r, name) for name in ("test", "heldout") for r in results]
    headers = ["run", "set", "sentences", "placeholders kept (find multisets)", "placeholders kept (counted)",
               "BLEU", "chrF", "length ratio",
               "runaway (repeat to the limit)", "at the length limit", "ending in one piece 4+ times"]
    body = (f"{args.note.strip()}\n\n" + markdown_table(headers, rows)
            + "\n\nRunaway = a translation that reached its length limit (source tokens + 50) ending in one piece "
              f"repeated {RUNAWAY_RUN}+ times; \"at the length limit\" counts every translation that ended there; "
              f"\"ending in one piece {RUNAWAY_RUN}+ times\" counts the translations whose last {RUNAWAY_RUN} pieces "
              "(re-tokenized by the run's tokenizer) are one piece, wherever they stopped. "
              "Placeholders kept = of the sentences whose source holds a placeholder, those whose translation "
              "holds the same ones: by `find`'s multisets, and counted (`tokenize/placeholders.py` "
              "`same_placeholders`, the share `clearformer evaluate` prints, which also finds a source's "
              "placeholder written against another in the translation). Both are read by this code's `find` "
              "for every row.\n\n"
              "Messages with unusual placeholders (beam 4):\n\n" + "\n".join(unusual_examples(results)))
    for r in results:
        for name in ("test", "heldout"):
            for source, tail in r["sets"][name]["runaway_examples"][:1]:
                body += f"\n\nA runaway of `{r['label']}` on {name}: `{source}` -> `...{tail}`"
    write_section("placeholders", "Placeholders: masked before the model, restored after (en-fr-software)", body,
                  command=args.command)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    held = sub.add_parser("heldout")
    held.add_argument("--out", type=Path, required=True)
    held.add_argument("--downloads", type=Path, required=True)
    held.add_argument("--recipe", type=Path, required=True, help="the built en-fr-software folder")
    ev = sub.add_parser("evaluate")
    ev.add_argument("--run", required=True)
    ev.add_argument("--label", required=True)
    ev.add_argument("--test", required=True)
    ev.add_argument("--heldout", required=True)
    ev.add_argument("--out", required=True)
    ev.add_argument("--beam", type=int, default=4)
    ev.add_argument("--repeats", choices=("bounded", "free"), help="this branch's repeat bound (default: on)")
    ev.add_argument("--threads", type=int, default=1)
    ev.add_argument("--limit", type=int, default=0, help="first N pairs of each set (0 = all)")
    rep = sub.add_parser("report")
    rep.add_argument("results", nargs="+")
    rep.add_argument("--note", default="")
    rep.add_argument("--command", default=None)
    args = parser.parse_args(argv)
    if args.step == "heldout":
        build_heldout(args.out, args.downloads, args.recipe)
    elif args.step == "evaluate":
        evaluate(args)
    else:
        report(args)


if __name__ == "__main__":
    main()
