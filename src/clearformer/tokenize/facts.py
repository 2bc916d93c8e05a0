"""What a run's tokenizer records besides its vocabulary: how sources are framed and how placeholders are
read, all about text <-> ids. Saved in tokenizer.json by every tokenizer class. (How long a translation runs
and which words it may choose, the run's decoding facts, are generate/facts.py's `DecodingFacts`, in
decoding.json; a tokenizer.json of an earlier release still holds them, and they are read from there.)

    source_eos     <eos> appended to every source sentence before encoding (Marian and fairseq do:
                   it marks where the source ends; BENCHMARKS.md, "Translation length").
                   `tokenize.encode_source` honours it for training, translate, evaluate, explain
                   and serve alike. `clearformer train` turns it on unless --no-source-eos.
    mask_placeholders  every placeholder of a sentence (tokenize/placeholders.py `find`, plus
                   `placeholder_patterns`, the user's extra regexes) is replaced by a reserved
                   token ｟ph0｠, ｟ph1｠, ... before the model and restored after decoding
                   (`tokenize.mask_placeholders` / `restore_placeholders`). Off for runs trained
                   before it existed, which therefore translate exactly as they did.

All are facts about how this tokenizer turns the run's text into ids and back, not about the architecture,
and the tokenizer is at hand wherever text is encoded or decoded.
"""

from __future__ import annotations

from clearformer.tokenize.placeholders import check_patterns
from clearformer.tokenize.standins import StandIns


class TokenizerFacts:
    """Mixed into every tokenizer: the facts, their JSON form and their check on loading."""

    source_eos: bool = False
    mask_placeholders: bool = False
    placeholder_patterns: tuple[str, ...] = ()
    placeholder_ids: tuple[int, ...] = ()  # the masked placeholders' reserved pieces (a class may compute them)
    # Pieces that stand in for the reserved placeholder tokens in a vocabulary without them (tokenize/standins.py;
    # Marian's); None: the vocabulary has the reserved tokens, or does not mask.
    stand_ins: StandIns | None = None

    def encode_target_text(self, text: str) -> list[int]:
        """A target sentence's ids: as a source's, unless the tokenizer has a target side of its own (Marian)."""
        return self.encode(text)

    def facts(self) -> dict:
        return {"source_eos": self.source_eos, "mask_placeholders": self.mask_placeholders,
                "placeholder_patterns": list(self.placeholder_patterns)}

    def built_with(self, facts: dict | None, mask_by_stand_ins: bool = False) -> None:
        """The facts a constructor is given (tokenizer.json's keys, checked by `set_facts`), taken once, at the end
        of `__init__`: a tokenizer is built whole, never given its facts afterwards. `mask_by_stand_ins` (an
        importer's vocabulary made elsewhere, without reserved tokens): masking is on where numerals stand in."""
        self.set_facts(facts or {})
        if mask_by_stand_ins and self.stand_ins is not None:
            self.mask_placeholders = True

    def set_facts(self, data: dict) -> None:
        """Take source_eos / mask_placeholders / placeholder_patterns from a tokenizer.json object (each absent one
        keeps its value), while a class's `load` builds the tokenizer; ValueError for a wrong type (load_tokenizer
        reports it as a damaged tokenizer). An earlier release's decoding facts there are generate/facts.py's."""
        source_eos = data.get("source_eos", self.source_eos)
        if not isinstance(source_eos, bool):
            raise ValueError(f"source_eos must be true or false, not {source_eos!r}")
        self.source_eos = source_eos
        masking = data.get("mask_placeholders", self.mask_placeholders)
        if not isinstance(masking, bool):
            raise ValueError(f"mask_placeholders must be true or false, not {masking!r}")
        patterns = data.get("placeholder_patterns", list(self.placeholder_patterns))
        if not isinstance(patterns, list):
            raise ValueError(f"placeholder_patterns must be a list of regular expressions, not {patterns!r}")
        self.mask_placeholders, self.placeholder_patterns = masking, check_patterns(patterns)
