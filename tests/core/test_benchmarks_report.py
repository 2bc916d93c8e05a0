"""BENCHMARKS.md is ordered by topic: its contents list matches its headings, and a script's new section lands in
its topic (benchmarks/report.py)."""

import re
from pathlib import Path

import pytest

from benchmarks import report

ROOT = Path(__file__).resolve().parents[2]


def test_the_contents_list_is_the_headings():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert report.rebuild_contents(text) == text


def test_topics_are_in_the_declared_order_and_headings_carry_no_issue_or_time():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    topics = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert topics == [t for t in report.TOPICS if t in topics]
    for line in text.splitlines():
        if line.startswith("### "):
            assert not re.search(r"issue \d+|\d\d:\d\d", line), line


def test_every_written_section_sits_in_its_topic():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    topic = None
    for line in text.splitlines():
        if line.startswith("## "):
            topic = line[3:]
        match = re.match(r"<!-- begin (\S+) -->", line)
        if match:
            assert report.topic_of(match.group(1)) == topic, (match.group(1), topic)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\n<!-- contents -->\n<!-- /contents -->\n\n## Translation quality\n\n"
                    "<!-- begin quality -->\n### Old quality\n\nold\n<!-- end quality -->\n\n## Decoding speed\n\n"
                    "Note outside a section.\n", encoding="utf-8")
    monkeypatch.setattr(report, "BENCHMARKS", path)
    return path


def test_a_new_section_goes_to_the_end_of_its_topic_and_into_the_contents(scratch):
    report.write_section("quality_new", "New quality", "42 BLEU", command="python x")
    report.write_section("decode_more", "More decoding", "1.5x", command="python y")
    text = scratch.read_text(encoding="utf-8")
    assert text.index("### Old quality") < text.index("### New quality") < text.index("## Decoding speed")
    assert text.index("Note outside a section.") < text.index("### More decoding")
    assert "  - [New quality](#new-quality)" in text and "  - [More decoding](#more-decoding)" in text
    assert "- Command: `python x`" in text


def test_rewriting_a_section_replaces_it_in_place(scratch):
    report.write_section("quality", "Quality again", "new numbers", command="python z")
    text = scratch.read_text(encoding="utf-8")
    assert "old" not in text.split("<!-- begin quality -->")[1].split("<!-- end quality -->")[0]
    assert text.count("<!-- begin quality -->") == 1 and "new numbers" in text
    assert text.index("### Quality again") < text.index("## Decoding speed")
