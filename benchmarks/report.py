"""Write one benchmark's results into its own section of BENCHMARKS.md.

Each benchmark script owns the section between `<!-- begin NAME -->` and `<!-- end NAME -->`
and rewrites only that, so scripts can run in any order. Every section states the machine,
the date and the command that produced it.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import shlex
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "BENCHMARKS.md"
HEADER = "# Benchmarks\n\nEvery number below was measured by a script in `benchmarks/`; each section says how.\n"


def machine() -> str:
    """One line describing where the numbers come from."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    where = f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads"
    if torch.cuda.is_available():
        where += f", GPU {torch.cuda.get_device_name(0)}"
    return where


def invocation() -> str:
    """How the running script was started: `-m benchmarks.x` or its path relative to the repository."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return f"-m {spec.name}"
    return os.path.relpath(sys.argv[0], ROOT)


def write_section(name: str, title: str, body: str, command: str | None = None, where: str | None = None) -> None:
    """Replace (or append) section `name` of BENCHMARKS.md with `body` (markdown).

    `where` describes the machine when the numbers were measured elsewhere (a lent GPU machine).
    """
    command = command or "python " + invocation() + (" " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "")
    # Markdown: a command holding a backtick needs a longer fence (and spaces inside it).
    shown = f"`` {command} ``" if "`" in command else f"`{command}`"
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = (f"<!-- begin {name} -->\n## {title}\n\n- Machine: {where or machine()}\n- Date: {stamp}\n"
               f"- Command: {shown}\n\n{body.strip()}\n<!-- end {name} -->")
    text = BENCHMARKS.read_text(encoding="utf-8") if BENCHMARKS.exists() else HEADER
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->", re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
    tmp = BENCHMARKS.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, BENCHMARKS)


def markdown_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
