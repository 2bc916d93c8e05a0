"""generate/facts.py: a run's decoding facts are their own immutable record, saved as decoding.json beside the
tokenizer (a pure text <-> ids object), built whole by each producer and never assigned afterwards; a run folder of
an earlier release (the facts inside tokenizer.json, no decoding.json) still loads and translates as before, read in
memory, the folder left as it was."""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

import clearformer
from clearformer.errors import UserError
from clearformer.generate import DecodingOptions
from clearformer.generate.facts import DECODING_FILE, NO_FACTS, DecodingFacts
from clearformer.load import load_decoding_facts, load_model
from clearformer.translator import load_run

DECODING_ATTRIBUTES = {"length_ratio", "max_length_factor", "shortlist"}
SRC = Path(clearformer.__file__).parent


def test_the_record_is_frozen_and_checked_when_built():
    facts = DecodingFacts(length_ratio=1.25, max_length_factor=2.5)
    for name in DECODING_ATTRIBUTES:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(facts, name, 1.0)
    assert dataclasses.replace(facts, length_ratio=2.0) == DecodingFacts(2.0, 2.5) and facts.length_ratio == 1.25
    with pytest.raises(ValueError, match="length_ratio"):
        DecodingFacts(length_ratio=-1.0)
    with pytest.raises(ValueError, match="max_length_factor"):
        DecodingFacts(max_length_factor=1e9)


def assigned_attributes(tree: ast.AST):
    """(line, attribute) of every assignment to an attribute outside a constructor of its own object: `x.a = v`,
    `x.a += v`, `setattr(x, "a", v)`, `object.__setattr__(x, "a", v)`."""
    constructors = {id(node) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                    and node.name in ("__init__", "__post_init__")}
    inside: set[int] = set()
    for node in ast.walk(tree):
        if id(node) in constructors:
            inside |= {id(child) for child in ast.walk(node)}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Attribute) and not (
                        id(leaf) in inside and isinstance(leaf.value, ast.Name) and leaf.value.id == "self"):
                    yield node.lineno, leaf.attr
        if isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("setattr", "__setattr__"):
                yield node.lineno, str(node.args[1].value)


def test_no_src_module_assigns_a_decoding_fact_after_construction():
    """The facts are built whole where they are produced (train setup, the imports, averaging): no module of src/
    assigns one to an existing object (the tokenizer held them once, assigned after construction)."""
    found = [f"{path.relative_to(SRC)}:{line} .{name}" for path in sorted(SRC.rglob("*.py"))
             for line, name in assigned_attributes(ast.parse(path.read_text(encoding="utf-8")))
             if name in DECODING_ATTRIBUTES]
    assert found == []


TEXT_FACTS = {"source_eos", "mask_placeholders", "placeholder_patterns", "stand_ins"}


def test_no_src_module_gives_a_tokenizer_its_facts_after_construction():
    """A tokenizer is built whole too (tokenize/facts.py `built_with`, from its constructor): no module sets one of
    its facts on another object, and `set_facts` is called from `built_with` only."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            found += [f"{path.relative_to(SRC)}:{node.lineno} .{leaf.attr}" for target in targets
                      for leaf in ast.walk(target) if isinstance(leaf, ast.Attribute) and leaf.attr in TEXT_FACTS
                      and not (isinstance(leaf.value, ast.Name) and leaf.value.id == "self")]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "set_facts":
                found += [] if path.name == "facts.py" else [f"{path.relative_to(SRC)}:{node.lineno} set_facts"]
    assert found == []


def test_the_tokenizer_is_text_to_ids_only(toy_model):
    _, tokenizer, _ = load_model(toy_model)
    assert not DECODING_ATTRIBUTES & set(tokenizer.facts())
    assert not any(hasattr(tokenizer, name) for name in DECODING_ATTRIBUTES)


def layouts(toy_model: Path, tmp_path: Path, facts: DecodingFacts) -> tuple[Path, Path]:
    """The toy run twice: today's layout (decoding.json) and an earlier release's (the facts in tokenizer.json)."""
    new, old = tmp_path / "new", tmp_path / "old"
    for folder in (new, old):
        shutil.copytree(toy_model, folder, ignore=shutil.ignore_patterns("checkpoints", DECODING_FILE))
    facts.save(new)
    info = json.loads((old / "tokenizer.json").read_text(encoding="utf-8"))
    info.update(length_ratio=facts.length_ratio, max_length_factor=facts.max_length_factor)
    (old / "tokenizer.json").write_text(json.dumps(info), encoding="utf-8")
    return new, old


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_earlier_releases_run_folder_loads_and_translates_as_todays(toy_model, tmp_path):
    """An earlier release's folder is read in memory: the same facts, the same translations, not a byte of the
    folder changed and no decoding.json written into it."""
    facts = DecodingFacts(length_ratio=3.0)  # long enough that the brevity rule changes what is written
    new, old = layouts(toy_model, tmp_path, facts)
    before = snapshot(old)
    sentences = ["I love you", "I love AI", "the cat sleeps"]
    options = DecodingOptions(beam=4, brevity=3.0)
    got = {}
    for folder in (new, old):
        run = load_run(folder)
        assert run.facts == facts
        got[folder.name] = [t.text for t in run.open().translate(sentences, options)]
    assert got["new"] == got["old"]
    assert snapshot(old) == before and not (old / DECODING_FILE).exists()
    plain = [t.text for t in load_run(new).open().translate(sentences, options.but(brevity=0.0))]
    assert plain != got["new"]  # the facts reached the search (the brevity rule wrote longer translations)


def test_train_writes_decoding_json_and_the_translator_loads_it(toy_model):
    """`clearformer train` built the record with its measured ratio; the tokenizer.json has none of it."""
    recorded = json.loads((toy_model / DECODING_FILE).read_text(encoding="utf-8"))
    assert set(recorded) == {"length_ratio", "max_length_factor", "shortlist"} and recorded["length_ratio"] > 0
    tokenizer_json = json.loads((toy_model / "tokenizer.json").read_text(encoding="utf-8"))
    assert not DECODING_ATTRIBUTES & set(tokenizer_json)
    run = load_run(toy_model)
    assert run.facts == load_decoding_facts(toy_model, run.tokenizer) != NO_FACTS
    assert run.open().facts is run.facts


@pytest.mark.parametrize("damage, named", [
    ({"length_ratio": "1.2"}, "length_ratio must be a number"),
    ({"shortlist": "shortlist.bin"}, "shortlist must be an object"),
    ({"shortlist": {"file": "shortlist.bin", "sha256": "0", "vocab_size": 10 ** 9}}, "vocab_size"),
])
def test_a_damaged_decoding_json_is_one_line_naming_it(toy_model, tmp_path, damage, named):
    folder = tmp_path / "run"
    shutil.copytree(toy_model, folder, ignore=shutil.ignore_patterns("checkpoints"))
    data = {**DecodingFacts().to_dict(), **damage}
    (folder / DECODING_FILE).write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError, match=f"{DECODING_FILE}: .*{named}"):
        load_run(folder)
