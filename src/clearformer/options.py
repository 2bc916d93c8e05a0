"""The one way an options object is made: each field says its flag, its help and its range.

    beam: int = option(1, "--beam", "beam size", at_least=1, at_most=MAX_BEAM, metavar="N")

An options class derives from `Options` and is a dataclass of such fields. From the fields alone:

    add_arguments(parser)   the command-line flags (fields without a flag have none)
    from_args(args)         the object the command line chose, checked
    check()                 a one-line UserError for a value out of range, of the wrong type, not finite,
                            or not among the choices: the same message from code as from the command line
    to_dict() / from_dict() plain JSON (a run's saved options)

An options object may be made of parts (a field whose default_factory is another Options class, e.g.
TrainOptions.loop): flags, checks and the flat `values`/`from_values` views go through the parts, and
field names are unique across them, so `--steps` is LoopOptions.steps wherever the loop is used.

A choice is checked by `check()`, not by argparse, so `--early-stop x` and `DecodingOptions(stop="x")`
are refused by the same line.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
from dataclasses import MISSING, dataclass, field, fields

from clearformer.errors import UserError

NOT_GIVEN = argparse.SUPPRESS  # the default of a flag whose absence matters (the value then comes from elsewhere)


def option(default=MISSING, flag: str | None = None, help: str = "", *, factory=MISSING, at_least=None,
           at_most=None, above=None, below=None, choices: tuple | None = None, inverted: bool = False,
           hint: str = "", **argparse_kwargs):
    """A dataclass field with its command-line definition and range in its metadata.

    at_least/at_most: inclusive bounds; above/below: exclusive ones; choices: the allowed values;
    inverted: a store_true flag that sets the field to False (--whole: split=False); hint: appended to
    a range error (--temperature's "use --greedy"); argparse_kwargs: metavar, action, type..."""
    metadata = {"flag": flag, "help": help, "inverted": inverted, "at_least": at_least, "at_most": at_most,
                "above": above, "below": below, "choices": choices, "hint": hint, "argparse": argparse_kwargs}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def dest(flag: str) -> str:
    """Where argparse keeps a flag's value: --early-stop -> early_stop."""
    return flag.lstrip("-").replace("-", "_")


def shown(value) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else str(value)


def check_value(name: str, value, at_least=None, at_most=None, above=None, below=None, hint: str = "") -> None:
    """A one-line UserError unless `value` (a number, or None = not set) lies in the range; floats finite.

    Closed bounds read "at least"/"at most"; a range with an open end reads as an interval, "[0, 1)"."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{name} must be a finite number, not {value}")
    low, high = (above, below) if above is not None or below is not None else (None, None)
    if low is not None or high is not None:
        low = low if low is not None else at_least
        high = high if high is not None else at_most
        inside = (low is None or (value > low if above is not None else value >= low)) and \
                 (high is None or (value < high if below is not None else value <= high))
        if not inside:
            if low is None or high is None:
                words = f"greater than {shown(above)}" if above is not None else f"less than {shown(below)}"
            else:
                words = ("in " + ("(" if above is not None else "[") + f"{shown(low)}, {shown(high)}"
                         + (")" if below is not None else "]"))
            raise UserError(f"{name} must be {words}, not {shown(value)}{hint}")
        return
    if at_least is not None and value < at_least:
        raise UserError(f"{name} must be at least {shown(at_least)}, not {shown(value)}{hint}")
    if at_most is not None and value > at_most:
        raise UserError(f"{name} must be at most {shown(at_most)}, not {shown(value)}{hint}")


# The one reading of a field's annotation, for options and for config.json alike (config.py `ModelConfig.from_dict`):
# each word of "int | None" -> the Python types a value may have, and how a message names them.
TYPE_WORDS = {"int": ((int,), "an integer"), "float": ((int, float), "a number"), "str": ((str,), "a string"),
              "bool": ((bool,), "true or false"), "dict": ((dict,), "an object"), "None": ((type(None),), "null")}


def fits(value, annotation: str) -> bool:
    """Whether `value` fits an annotation such as "int | None" (a bool is no number here). A word this check does
    not know (a part, a nested config: checked by its own class) lets any value through."""
    for word in annotation.replace(" ", "").split("|"):
        known = TYPE_WORDS.get(word.split("[")[0])
        if known is None:
            return True
        allowed = known[0]
        if isinstance(value, allowed) and (bool in allowed or not isinstance(value, bool)):
            return True
    return False


def wanted(annotation: str) -> str:
    """How a message names what an annotation takes: "an integer or a number"."""
    words = [word.split("[")[0] for word in annotation.replace(" ", "").split("|")]
    return " or ".join(TYPE_WORDS[w][1] for w in words if w in TYPE_WORDS and w != "None")


def check_type(name: str, value, annotation: str) -> None:
    """A UserError when `value` does not fit an annotation such as "int | None" (`fits`)."""
    if not fits(value, annotation):
        raise UserError(f"{name} must be {wanted(annotation)}, not {value!r}")


def part(cls, **defaults):
    """A field holding a part: an Options object of its own (TrainOptions.loop), with these defaults."""
    return field(default_factory=functools.partial(cls, **defaults), metadata={"part": cls})


def part_class(item: dataclasses.Field):
    """The Options class of a part field, or None for a plain field."""
    return item.metadata.get("part")


def name_of(item: dataclasses.Field) -> str:
    """How messages name a field: its flag, or its name when it has none."""
    return item.metadata.get("flag") or item.name


@dataclass
class Options:
    """The base of every options dataclass (see the module docstring)."""

    def check(self):
        """Check every field (types, ranges, choices, parts); return self. Subclasses add the checks that
        relate two fields, after `super().check()`."""
        for item in fields(self):
            value = getattr(self, item.name)
            if part_class(item) is not None:
                value.check()
                continue
            spec, name = item.metadata, name_of(item)
            check_type(name, value, str(item.type))
            if spec.get("choices") is not None and value not in spec["choices"]:
                raise UserError(f"{name} must be one of {', '.join(map(str, spec['choices']))}, not {shown(value)}")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                check_value(name, value, spec.get("at_least"), spec.get("at_most"), spec.get("above"),
                            spec.get("below"), spec.get("hint", ""))
        return self

    def but(self, **changes):
        """A copy with `changes` applied (checked)."""
        return dataclasses.replace(self, **changes).check()

    # ------------------------------------------------------------------ the command line

    @classmethod
    def add_arguments(cls, parser, only: tuple[str, ...] | None = None, defaults: bool = True,
                      template: Options | None = None) -> None:
        """Add the flag of every field that has one (or of the fields named in `only`), parts included,
        each part's under its `title` (an argument group) when it has one.

        The defaults shown and used are `template`'s values (default: `cls()`, so a part's defaults are
        its holder's: LMOptions' loop saves every 250 steps); defaults=False: a flag not given leaves no
        value (NOT_GIVEN), so `given(args)` holds only what the command line named (train: the preset's
        defaults fill the rest)."""
        template = cls() if template is None else template
        title = getattr(cls, "title", "")
        if title and isinstance(parser, argparse.ArgumentParser):
            parser = parser.add_argument_group(title)
        for item in fields(cls):
            part = part_class(item)
            if part is not None:
                part.add_arguments(parser, only, defaults, getattr(template, item.name))
                continue
            spec = item.metadata
            if not spec.get("flag") or (only is not None and item.name not in only):
                continue
            kwargs = {"help": spec["help"], **spec["argparse"]}
            if spec["choices"] is not None:
                kwargs.setdefault("metavar", "{" + ",".join(map(str, spec["choices"])) + "}")
            if kwargs.get("action") is None:
                kwargs.setdefault("type", float if "float" in str(item.type) else
                                  int if "int" in str(item.type) else str)
                kwargs.setdefault("metavar", {float: "X", int: "N"}.get(kwargs["type"]))
            if not defaults:
                kwargs["default"] = NOT_GIVEN
            elif kwargs.get("action") is None:
                kwargs.setdefault("default", getattr(template, item.name))
            parser.add_argument(spec["flag"], **kwargs)

    @classmethod
    def given(cls, args: argparse.Namespace) -> dict:
        """{field name: value} of the flags on `args` (all parts, flat)."""
        chosen = {}
        for item in fields(cls):
            part = part_class(item)
            if part is not None:
                chosen.update(part.given(args))
            elif item.metadata.get("flag") and hasattr(args, dest(item.metadata["flag"])):
                value = getattr(args, dest(item.metadata["flag"]))
                chosen[item.name] = not value if item.metadata["inverted"] else value
        return chosen

    @classmethod
    def from_args(cls, args: argparse.Namespace, **overrides):
        """The options the command line chose (fields without a flag keep their defaults), checked."""
        return cls.from_values(**{**cls.given(args), **overrides}).check()

    # ------------------------------------------------------------------ flat views of an object made of parts

    @classmethod
    def from_values(cls, **values):
        """An object from flat field values, each routed to the part that holds it (not checked)."""
        return cls().with_values(**values)

    def with_values(self, **values):
        """A copy with flat field values applied, each in the part that holds it (not checked); a
        UserError naming a value no field takes."""
        changes = {}
        for item in fields(self):
            part = part_class(item)
            if part is not None:
                names = part.names()
                mine = {name: values.pop(name) for name in list(values) if name in names}
                if mine:
                    changes[item.name] = getattr(self, item.name).with_values(**mine)
            elif item.name in values:
                changes[item.name] = values.pop(item.name)
        if values:
            raise UserError(f"unknown option(s) for {type(self).__name__}: {', '.join(sorted(values))}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def names(cls) -> set[str]:
        """Every field name, parts included (flat)."""
        out = set()
        for item in fields(cls):
            part = part_class(item)
            out |= part.names() if part is not None else {item.name}
        return out

    def values(self) -> dict:
        """Every field's value, parts included (flat)."""
        out = {}
        for item in fields(self):
            value = getattr(self, item.name)
            out.update(value.values() if part_class(item) is not None else {item.name: value})
        return out

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "options"):
        """The object `to_dict` wrote; a one-line UserError naming an unknown or missing part."""
        if not isinstance(data, dict):
            raise UserError(f"{where}: not a JSON object")
        known = {item.name: item for item in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise UserError(f"{where}: unknown option(s) {', '.join(unknown)}")
        chosen = {}
        for name, value in data.items():
            part = part_class(known[name])
            chosen[name] = part.from_dict(value, f"{where}.{name}") if part is not None else value
        return cls(**chosen)
