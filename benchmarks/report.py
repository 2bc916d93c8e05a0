"""Write one benchmark's results into its own section of BENCHMARKS.md.

Each benchmark script owns the section between `<!-- begin NAME -->` and `<!-- end NAME -->`
and rewrites only that, so scripts can run in any order. Every section states the machine,
the date and the command that produced it.
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
import sys
from pathlib import Path

import torch

from clearformer.train.mfu import cpu_name

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "BENCHMARKS.md"
HEADER = "# Benchmarks\n\n<!-- contents -->\n<!-- /contents -->\n"


def machine() -> str:
    """One line describing where the numbers come from."""
    where = f"{cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads"
    if torch.cuda.is_available():
        where += f", GPU {torch.cuda.get_device_name(0)}"
    return where


def invocation() -> str:
    """How the running script was started: `-m benchmarks.x` or its path relative to the repository."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return f"-m {spec.name}"
    return os.path.relpath(sys.argv[0], ROOT)


# Topics of BENCHMARKS.md, in order, and which sections belong to each (by the section's NAME prefix).
# A section not listed goes to "Around the model".
TOPICS = {
    "Translation quality": ("quality", "gpu_bleu", "placeholder"),
    "Translation length": ("length", "beam_stopping"),
    "Decoding speed": ("decode", "ct2", "gpu_window_decode"),
    "Training throughput": ("train_throughput", "gpu-check", "gpu_window_train"),
    "Language model": ("lm-", "kv-cache"),
    "The tutorials' claims": ("claims",),
    "Around the model": (),
}


def topic_of(name: str) -> str:
    for topic, prefixes in TOPICS.items():
        if any(name.startswith(prefix) for prefix in prefixes):
            return topic
    return "Around the model"


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def rebuild_contents(text: str) -> str:
    """The contents between `<!-- contents -->` and `<!-- /contents -->`: every topic with its sections."""
    lines, topic = [], None
    for line in text.splitlines():
        if line.startswith("## "):
            topic = line[3:].strip()
            lines.append(f"- {topic}")
        elif line.startswith("### ") and topic:
            title = line[4:].strip()
            lines.append(f"  - [{title}](#{anchor(title)})")
    body = "\n".join(lines)
    return re.sub(r"<!-- contents -->.*?<!-- /contents -->", lambda _: f"<!-- contents -->\n{body}\n<!-- /contents -->",
                  text, flags=re.S)


def insert_in_topic(text: str, topic: str, section: str) -> str:
    """`section` at the end of `topic` (before the next topic's heading); a missing topic goes at the end."""
    heading = f"## {topic}\n"
    if heading not in text:
        return text.rstrip() + f"\n\n## {topic}\n\n" + section + "\n"
    start = text.index(heading) + len(heading)
    following = re.search(r"^## ", text[start:], flags=re.M)
    end = start + following.start() if following else len(text)
    return text[:end].rstrip() + "\n\n" + section + "\n\n" + text[end:].lstrip()


def write_section(name: str, title: str, body: str, command: str | None = None, where: str | None = None) -> None:
    """Replace section `name` of BENCHMARKS.md with `body` (markdown), or add it at the end of its topic.

    `where` describes the machine when the numbers were measured elsewhere (a lent GPU machine).
    """
    put_section(name, section_text(name, title, body, command, where))


def section_text(name: str, title: str, body: str, command: str | None = None, where: str | None = None) -> str:
    """Section `name` as BENCHMARKS.md holds it: its markers, title, machine, date (now), command and body."""
    command = command or "python " + invocation() + (" " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "")
    # Markdown: a command holding a backtick needs a longer fence (and spaces inside it).
    shown = f"`` {command} ``" if "`" in command else f"`{command}`"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<!-- begin {name} -->\n### {title}\n\n- Machine: {where or machine()}\n- Date: {stamp}\n"
            f"- Command: {shown}\n\n{body.strip()}\n<!-- end {name} -->")


def put_section(name: str, section: str) -> None:
    """Replace section `name` of BENCHMARKS.md with the whole `section` text (`section_text`), or add it
    at the end of its topic; atomically."""
    text = BENCHMARKS.read_text(encoding="utf-8") if BENCHMARKS.exists() else HEADER
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = insert_in_topic(text, topic_of(name), section)
    text = rebuild_contents(text)
    tmp = BENCHMARKS.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, BENCHMARKS)


def markdown_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
