"""Issue 51: hostile catalogues for `translate --po`. A catalogue msgfmt refuses is refused in one line naming the
file and the line, exit 2, and msgfmt's own verdict is checked beside ours; a header's odd charset or Plural-Forms
is one line; a 5 MB message is read in linear time.

A case that could run away (a 5,000-digit nplurals a loop might count to, a 5 MB line, a full disk) runs in a
child process under a memory and a time limit; a small file that can only be parsed, refused or translated by the
toy model runs in-process through cli.main (a child costs a torch import, and this file has 30 cases)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import one_line, run_child

HEADER = ('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
          '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n')

# name -> (the catalogue after HEADER, the line our error names, words of our error)
REFUSED = {
    "unterminated string": ('msgid "Open the\nmsgstr ""\n', 6, "end-of-line within string"),
    "unterminated continuation": ('msgid ""\n"Open the file\\"\nmsgstr ""\n', 7, "end-of-line within string"),
    "invalid escape": ('msgid "a\\q b"\nmsgstr ""\n', 6, "invalid control sequence \\q"),
    "duplicate msgid": ('msgid "a"\nmsgstr ""\n\nmsgid "a"\nmsgstr "b"\n', 9, "duplicate message definition"),
    "duplicate obsolete": ('msgid "a"\nmsgstr ""\n\n#~ msgid "a"\n#~ msgstr "b"\n', 9, "duplicate message definition"),
    "second header": ('msgid ""\nmsgstr "x"\n', 6, "a second header"),
    "msgstr[n] without msgid_plural": ('msgid "a"\nmsgstr[0] "b"\n', 7, "missing 'msgid_plural' section"),
    "msgstr after msgid_plural": ('msgid "a"\nmsgid_plural "as"\nmsgstr "b"\n', 8, "msgstr after msgid_plural"),
    "plural index gap": ('msgid "a"\nmsgid_plural "as"\nmsgstr[0] "b"\nmsgstr[2] "c"\n', 9, "wrong index"),
    "more forms than nplurals": ('msgid "a"\nmsgid_plural "as"\nmsgstr[0] "b"\nmsgstr[1] "c"\nmsgstr[2] "d"\n', 10,
                                 "nplurals=2"),
    "no msgstr": ('msgid "a"\n\nmsgid "b"\nmsgstr ""\n', 8, "missing 'msgstr' section"),
    "unknown keyword": ('msgid "a"\nmsgstr ""\nmsgfoo "b"\n', 8, "keyword 'msgfoo' unknown"),
    "a string without quotes": ('msgid a\nmsgstr ""\n', 6, "not a gettext catalogue"),
    "domain": ('domain "x"\nmsgid "a"\nmsgstr ""\n', 6, "'domain'"),
    "unterminated previous msgid": ('#| msgid "old\nmsgid "a"\nmsgstr ""\n', 6, "end-of-line within string"),
}


def msgfmt_verdict(path) -> int | None:
    msgfmt = shutil.which("msgfmt")
    if msgfmt is None:
        return None
    return subprocess.run([msgfmt, "--check", "-o", "/dev/null", str(path)], capture_output=True).returncode


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_catalogue_msgfmt_refuses_is_one_line_naming_the_file_and_line(case, toy_run, tmp_path, in_process):
    body, line, words = REFUSED[case]
    path = tmp_path / "bad.po"
    path.write_text(HEADER + body, encoding="utf-8")
    assert msgfmt_verdict(path) in (None, 1), f"{case}: msgfmt accepts it, so must clearformer"
    code, _, err = in_process("translate", "--checkpoint", toy_run, "--po", path, "--out", tmp_path / "out.po")
    assert code == 2, (code, err)
    error = one_line(err)
    assert f"{path}:{line}:" in error and words in error, error
    assert not (tmp_path / "out.po").exists()


@pytest.mark.parametrize(("case", "body"), [
    ("empty msgid_plural", 'msgid "a"\nmsgid_plural ""\nmsgstr[0] ""\nmsgstr[1] ""\n'),
    ("hex and octal escapes", 'msgid "\\x41\\101\\a \\x4142"\nmsgstr ""\n'),
    ("keyword and strings on one line, tabs", 'msgid\t"a"  "b"\nmsgstr\t""\n'),
    ("string on the next line", 'msgid\n"a"\nmsgstr\n""\n'),
])
def test_what_msgfmt_accepts_is_accepted_and_comes_back_unchanged(case, body, toy_run, tmp_path, in_process):
    path = tmp_path / "odd.po"
    path.write_text(HEADER + body, encoding="utf-8")
    assert msgfmt_verdict(path) in (None, 0), f"{case}: msgfmt refuses it"
    code, _, err = in_process("translate", "--checkpoint", toy_run, "--po", path, "--out", tmp_path / "out.po")
    assert code == 0, err[-2000:]
    text = (tmp_path / "out.po").read_text(encoding="utf-8")
    assert body.split("msgstr")[0] in text  # the msgid as the file wrote it
    assert msgfmt_verdict(tmp_path / "out.po") in (None, 0)


@pytest.mark.parametrize("mode", ["--out", "--in-place"])
@pytest.mark.parametrize(("case", "header", "words"), [
    ("nplurals of 5,000 digits", '"Plural-Forms: nplurals=' + "9" * 5000 + '; plural=(n != 1);\\n"\n',
     "Plural-Forms"),  # the one a loop could count to: in a child
    ("charset punycode", '"Content-Type: text/plain; charset=punycode\\n"\n', "charset 'punycode'"),
    ("charset hex", '"Content-Type: text/plain; charset=hex\\n"\n', "charset 'hex'"),
    ("charset unknown", '"Content-Type: text/plain; charset=no-such-charset\\n"\n', "unknown charset"),
])
def test_a_headers_odd_value_is_one_line(mode, case, header, words, toy_run, tmp_path, in_process):
    path = tmp_path / "odd.po"
    path.write_text('msgid ""\nmsgstr ""\n' + header + '\nmsgid "a file"\nmsgid_plural "files"\nmsgstr[0] ""\n'
                    'msgstr[1] ""\n', encoding="utf-8")
    before = path.read_bytes()
    argv = ["translate", "--checkpoint", str(toy_run), "--po", str(path)]
    argv += ["--in-place"] if mode == "--in-place" else ["--out", str(tmp_path / "out.po")]
    if case.startswith("nplurals"):
        error = one_line(run_child(f"catalogue {case}", argv, tmp_path))
    else:
        code, _, err = in_process(*argv)
        assert code == 2, (code, err)
        error = one_line(err)
    assert words in error and str(path) in error
    assert path.read_bytes() == before


def test_a_5_mb_message_is_read_and_written_in_linear_time(toy_run, tmp_path):
    """One msgid of 5 MB on one line, and one of 70,000 lines: copied (no model reads a line that long), the
    file comes back the same outside the filled entry, in seconds (the child's limit: 120 s; polib took 100)."""
    path = tmp_path / "big.po"
    long_line = "word " * 1_000_000
    many = "".join(f'"{"word " * 15}"\n' for _ in range(70_000))
    path.write_text(HEADER + f'msgid "{long_line}"\nmsgstr ""\n\nmsgid ""\n{many}msgstr ""\n', encoding="utf-8")
    out = run_child("catalogue 5 MB message", ["translate", "--checkpoint", str(toy_run), "--po", str(path),
                                               "--out", str(tmp_path / "out.po")], tmp_path, seconds=90)
    assert out.code == 0, out.stderr[-2000:]
    assert "copied from the source" in out.stderr
    text = (tmp_path / "out.po").read_text(encoding="utf-8")
    assert f'msgid "{long_line}"' in text and many in text


@pytest.mark.parametrize("command", ["translate", "translate --po"])
def test_a_full_standard_output_is_one_line(command, toy_run, template_file, tmp_path):
    """Issue 51: `translate ... > /dev/full` traced back with ENOSPC; a full disk is one line, exit non-zero."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    argv = ["translate", "--checkpoint", str(toy_run)]
    argv += ["--po", str(template_file)] if command.endswith("--po") else ["the cat sat on the mat"]
    out = run_child(f"{command} > /dev/full", argv, tmp_path, stdout_to="/dev/full")
    assert out.code == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    error = out.stderr.strip().splitlines()[-1]  # after a warning about the sentence's unknown words, if any
    assert error.endswith("error: standard output: cannot be written (No space left on device)"), error


@pytest.fixture
def template_file(tmp_path) -> Path:
    path = tmp_path / "app.pot"
    path.write_text(HEADER + 'msgid "the cat"\nmsgstr ""\n', encoding="utf-8")
    return path
