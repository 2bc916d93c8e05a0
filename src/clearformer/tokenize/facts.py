"""What a run's tokenizer records besides its vocabulary: how sources are framed, and how long
translations run in its tokens. Saved in tokenizer.json by every tokenizer class.

    source_eos     <eos> appended to every source sentence before encoding (Marian and fairseq do:
                   it marks where the source ends; BENCHMARKS.md, "Translation length").
                   `tokenize.encode_source` honours it for training, translate, evaluate, explain
                   and serve alike. `clearformer train` turns it on unless --no-source-eos.
    length_ratio   target tokens per source token over the training pairs (sources' <eos> not
                   counted), measured by `clearformer train`; decoding's brevity rule
                   (generate/brevity.py) expects a translation of about this many tokens per
                   source token. 0 = not measured (imported models, language models): no rule.
    max_length_factor  a translation stops at round(factor x source tokens, </s> included), the rule of
                   Marian's `max-length-factor` that an imported model's engine applies (Firefox's
                   students: 2.5, from the package's decoder config); 0 = the paper's rule, source
                   length + 50 (generate/state.py `max_new_tokens`). `--max-extra` replaces either.
    mask_placeholders  every placeholder of a sentence (tokenize/placeholders.py `find`, plus
                   `placeholder_patterns`, the user's extra regexes) is replaced by a reserved
                   token ｟ph0｠, ｟ph1｠, ... before the model and restored after decoding
                   (`tokenize.mask_placeholders` / `restore_placeholders`). Off for runs trained
                   before it existed, which therefore translate exactly as they did.

All are facts about this tokenizer's tokens on the run's data, not about the architecture, and
the tokenizer is at hand wherever text is encoded or decoded.
"""

from __future__ import annotations

from clearformer.tokenize.placeholders import check_patterns
from clearformer.tokenize.shortlist import LexicalShortlist
from clearformer.tokenize.standins import StandIns

MAX_LENGTH_FACTOR = 100.0  # far above any engine's (Marian's default is 3); the model's max_len caps it anyway


class TokenizerFacts:
    """Mixed into every tokenizer: the facts, their JSON form and their check on loading."""

    source_eos: bool = False
    length_ratio: float = 0.0
    max_length_factor: float = 0.0
    mask_placeholders: bool = False
    placeholder_patterns: tuple[str, ...] = ()
    # A lexical shortlist over this vocabulary (tokenize/shortlist.py; Firefox's models ship one), kept in
    # the run folder as shortlist.bin beside the SentencePiece model; None for every other run.
    shortlist: LexicalShortlist | None = None
    placeholder_ids: tuple[int, ...] = ()  # the masked placeholders' reserved pieces (a class may compute them)
    # Pieces that stand in for the reserved placeholder tokens in a vocabulary without them (tokenize/standins.py;
    # Marian's); None: the vocabulary has the reserved tokens, or does not mask.
    stand_ins: StandIns | None = None

    def encode_target_text(self, text: str) -> list[int]:
        """A target sentence's ids: as a source's, unless the tokenizer has a target side of its own (Marian)."""
        return self.encode(text)

    def facts(self) -> dict:
        return {"source_eos": self.source_eos, "length_ratio": self.length_ratio,
                "max_length_factor": self.max_length_factor, "mask_placeholders": self.mask_placeholders,
                "placeholder_patterns": list(self.placeholder_patterns)}

    def set_facts(self, data: dict) -> None:
        """Take source_eos / length_ratio / max_length_factor / mask_placeholders / placeholder_patterns from a
        tokenizer.json object (each absent one keeps its value); ValueError for a wrong type (load_tokenizer
        reports it as a damaged tokenizer)."""
        source_eos = data.get("source_eos", self.source_eos)
        length_ratio = data.get("length_ratio", self.length_ratio)
        if not isinstance(source_eos, bool):
            raise ValueError(f"source_eos must be true or false, not {source_eos!r}")
        if isinstance(length_ratio, bool) or not isinstance(length_ratio, (int, float)) or length_ratio < 0:
            raise ValueError(f"length_ratio must be a number >= 0, not {length_ratio!r}")
        self.source_eos, self.length_ratio = source_eos, float(length_ratio)
        factor = data.get("max_length_factor", self.max_length_factor)
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 <= factor <= MAX_LENGTH_FACTOR:
            raise ValueError(f"max_length_factor must be a number from 0 to {MAX_LENGTH_FACTOR:g}, not {factor!r}")
        self.max_length_factor = float(factor)
        masking = data.get("mask_placeholders", self.mask_placeholders)
        if not isinstance(masking, bool):
            raise ValueError(f"mask_placeholders must be true or false, not {masking!r}")
        patterns = data.get("placeholder_patterns", list(self.placeholder_patterns))
        if not isinstance(patterns, list):
            raise ValueError(f"placeholder_patterns must be a list of regular expressions, not {patterns!r}")
        self.mask_placeholders, self.placeholder_patterns = masking, check_patterns(patterns)
