"""`clearformer learn`: the seeds' learning plan as lessons, checked questions, exercises and notebooks.

    clearformer learn                         the lessons, in the seeds' order
    clearformer learn N [--sentence TEXT]     lesson N: concept, snippet (run), your sentence's step, a question
                        [--answer X]          answer it from a script: exit 0 right, 1 wrong (with a hint)
    clearformer learn exercises               the exercises
    clearformer learn exercise NAME           write NAME's starter file into the current folder
    clearformer learn check NAME FILE         check your function: 0 all cases match, 1 one does not, 2 unusable
    clearformer learn solution NAME           write NAME's worked solution (never over a file)
    clearformer learn exercise transformer    lesson 15: the whole Transformer, from your exercise files
    clearformer learn check transformer FILE  the toy run's weights in your model: same logits and translations?
    clearformer learn train FILE              train your model with clearformer's trainer, translate "I love you"
    clearformer learn --notebooks DIR         write one Jupyter notebook per lesson into DIR
    clearformer learn --vocab                 the words the toy model knows (others become <unk>)

Exit 2 for unusable input (no such lesson or exercise, an answer that is not a number or a choice).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from clearformer.commands import options
from clearformer.errors import UserError
from clearformer.learn.capstone_run import CAPSTONE, CAPSTONE_FILE, check_capstone, train_capstone
from clearformer.learn.capstone_source import skeleton_text
from clearformer.learn.check import check_file, format_report
from clearformer.learn.exercises import exercise, exercise_list, starter_text, write_new
from clearformer.learn.extras import extra_text
from clearformer.learn.lessons import LESSONS, lesson
from clearformer.learn.present import lesson_list, lesson_text, terminal_width
from clearformer.learn.questions import Question, is_right
from clearformer.learn.sandbox import check_timeout
from clearformer.learn.snippets import run_snippet
from clearformer.learn.solutions import solution_text
from clearformer.learn.toy import DEFAULT_SENTENCE, known_words, load_toy_model, record_sentence


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "learn", help="lessons with questions, exercises checked against clearformer, notebooks",
        description="Learn the Transformer by doing it. Without arguments: the lessons. `learn N`: lesson N "
                    "(concept, a snippet run on the seeds' data, the same step on your sentence recorded from the "
                    "trained toy model, one checked question). `learn exercises`, `learn exercise NAME`, "
                    "`learn check NAME FILE`: write a piece yourself and check it.")
    parser.add_argument("what", nargs="?", metavar="N|exercises|exercise|check|solution|train",
                        help="a lesson number, or one of: exercises, exercise NAME, check NAME FILE, solution NAME, "
                             "train FILE (NAME `transformer`: lesson 15's whole model)")
    parser.add_argument("args", nargs="*", metavar="ARG",
                        help="NAME (exercise, solution), NAME FILE (check), FILE (train)")
    parser.add_argument("--sentence", default=DEFAULT_SENTENCE, help=f"your sentence (default {DEFAULT_SENTENCE!r})")
    parser.add_argument("--answer", help="answer the lesson's question without a prompt (exit 0 right, 1 wrong)")
    parser.add_argument("--notebooks", metavar="DIR", help="write one notebook per lesson into DIR")
    parser.add_argument("--overwrite", action="store_true", help="with --notebooks: replace existing notebooks")
    parser.add_argument("--vocab", action="store_true",
                        help="list the words the toy model (or --checkpoint) knows; others become <unk>")
    parser.add_argument("--timeout", default=None,
                        help="check: seconds your code may take over all cases (default 60; `learn train`: 1800)")
    parser.add_argument("--out", metavar="DIR", help="learn train: the run folder (default runs/my-transformer)")
    parser.add_argument("--steps", type=int, default=None, help="learn train: training steps (default: the toy "
                                                                  "preset's)")
    options.add_checkpoint(parser)
    parser.set_defaults(func=run)


def seconds(text: str) -> float:
    """--timeout: a number of seconds in (0, 3600] (learn/sandbox.py), refused in one line otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"--timeout {text[:40]!r} is not a number of seconds") from None
    return check_timeout(value)


def run(args) -> int:
    if args.notebooks:
        try:  # nbformat is in the `dev` extra
            from clearformer.learn.notebooks import write_notebooks
        except ImportError as error:
            raise UserError(f"--notebooks needs {error.name}: pip install 'clearformer[dev]'") from None

        written = write_notebooks(Path(args.notebooks), overwrite=args.overwrite)
        print(f"wrote {len(written)} notebooks into {args.notebooks}")
        return 0
    if args.vocab:
        return show_vocabulary(args.checkpoint)
    if args.what is None:
        sys.stdout.write(lesson_list())
        return 0
    if args.what in ("exercises", "exercise", "check", "solution", "train"):
        return run_exercise_command(args)
    return run_lesson(args)


def show_vocabulary(checkpoint) -> int:
    """`learn --vocab`: the source words the lessons' model knows, fitted to the terminal's width."""
    from rich.console import Console

    model, tokenizer, path = load_toy_model(checkpoint)
    words = known_words(tokenizer)
    console = Console(highlight=False, soft_wrap=False)
    console.print(f"The model in {path} knows these {len(words)} words; any other word (also in another case, "
                  "and punctuation) becomes <unk>:", markup=False)
    console.print("  ".join(words), markup=False)
    return 0


def run_exercise_command(args) -> int:
    if args.what == "exercises":
        if args.args:
            raise UserError("`learn exercises` takes no arguments")
        sys.stdout.write(exercise_list())
        return 0
    usage = {"exercise": "exercise NAME", "solution": "solution NAME", "check": "check NAME FILE",
             "train": "train FILE"}
    wanted = 2 if args.what == "check" else 1
    if len(args.args) != wanted:
        raise UserError(f"usage: clearformer learn {usage[args.what]}")
    if args.what == "train":
        return train_capstone(Path(args.args[0]), Path(args.out) if args.out else None,
                              seconds(args.timeout or "1800"), args.steps, args.overwrite, args.checkpoint)
    name = args.args[0]
    item = None if name == CAPSTONE else exercise(name)
    if args.what == "exercise":
        path = write_new(Path.cwd() / CAPSTONE_FILE if item is None else Path.cwd() / item.filename,
                         skeleton_text() if item is None else starter_text(item), name)
        print(f"wrote {path.name}: implement " + ("the blocks marked `# yours:`" if item is None else item.function)
              + f", then run `clearformer learn check {name} {path.name}`")
        return 0
    if args.what == "solution":
        path = write_new(Path.cwd() / (CAPSTONE_FILE if item is None else item.filename), solution_text(name), name)
        print(f"wrote {path.name}: a worked solution; `clearformer learn check {name} {path.name}` checks it")
        return 0
    timeout = seconds(args.timeout or "60")
    if item is None:
        report = check_capstone(Path(args.args[1]), timeout, args.checkpoint)
    else:
        report = check_file(item, Path(args.args[1]), timeout=timeout)
    sys.stdout.write(format_report(report))
    return 0 if report.ok else 1


def lesson_number(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise UserError(f"{text[:40]!r} is not a lesson number, nor exercises/exercise/check; "
                        f"lessons are 1..{len(LESSONS)}") from None
    if not 1 <= number <= len(LESSONS):
        raise UserError(f"no lesson {number}: lessons are 1..{len(LESSONS)} (`clearformer learn` lists them)")
    return number


def run_lesson(args) -> int:
    if args.args:
        raise UserError(f"unexpected argument {args.args[0][:40]!r} after the lesson number")
    item = lesson(lesson_number(args.what))
    if args.answer is not None and not args.answer.strip():
        raise UserError("--answer is empty")
    learner = record_sentence(args.sentence, args.checkpoint)
    try:
        question, views = item.ask(learner)
    except KeyError as error:
        raise UserError(f"this model's walkthrough lacks a step the lesson reads ({error.args[0]})") from None
    if args.answer is not None:
        is_right(question, args.answer)  # an unusable answer is exit 2 before anything is printed
    extra = extra_text(item.extra.get("show"), args.sentence, args.checkpoint)
    sys.stdout.write(lesson_text(item, run_snippet(item.snippet), learner, question, views, extra))
    sys.stdout.flush()
    if args.answer is not None:
        return judge(question, args.answer)
    if sys.stdin.isatty():
        return interact(question)
    return 0


def say(text: str) -> None:
    """A line of the lesson's dialogue, wrapped at words to the terminal's width."""
    print(textwrap.fill(text, terminal_width(), break_long_words=False, break_on_hyphens=False))


def judge(question: Question, answer: str) -> int:
    if is_right(question, answer):
        say(f"Right: {question.shown_answer()}. {question.why}")
        return 0
    say(f"Not quite. Hint: {question.hint}.")
    return 1


def interact(question: Question) -> int:
    """Ask, check, give the hint and one more try; then the answer."""
    for attempt in (1, 2):
        try:
            answer = input("Your answer: " if attempt == 1 else "Try again: ")
        except EOFError:
            print()
            return 0
        try:
            right = is_right(question, answer)
        except UserError as error:
            print(f"({error}.)")
            right = False
        if right:
            say(f"Right: {question.shown_answer()}. {question.why}")
            return 0
        if attempt == 1:
            say(f"Not quite. Hint: {question.hint}.")
    say(f"The answer: {question.shown_answer()}. {question.why}")
    return 1
