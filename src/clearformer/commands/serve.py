"""`clearformer serve`: the interactive walkthrough in the browser, on a local web server.

    clearformer serve                       the latest trained model (with none: the lessons' toy model, trained
                                            on first use into the cache folder: learn/toy.py)
    clearformer serve --checkpoint DIR      a given checkpoint: a translator, or a language model (`lm train`,
                                            `lm import gpt2`): type a prompt, see it continued token by token
    clearformer serve --open                and open the page in the default browser

Only requests whose Host is a localhost name or the --host address are answered (an IP literal too
when --host is 0.0.0.0 or ::), and only same-origin pages may POST: see serve/guard.py. Explanations
run in a bounded worker pool (limits.SERVER_WORKERS, SERVER_QUEUE); a full queue answers 503.

The same server answers LibreTranslate's API (POST /translate, GET /languages: serve/libretranslate.py), so
Weblate's LibreTranslate backend and `libretranslatepy` use the model: docs/catalogs.md.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from pathlib import Path

from clearformer.commands import options
from clearformer.errors import UserError
from clearformer.generate.options import DecodingOptions
from clearformer.languages import Languages
from clearformer.learn.toy import ensure_toy_model
from clearformer.limits import MAX_BATCH_SIZE, MAX_SERVER_LM_NEW_TOKENS, SERVER_LM_NEW_TOKENS
from clearformer.serve.batcher import Batching
from clearformer.store.runs import latest_checkpoint, runs_root


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve", help="the step-by-step walkthrough as a local web page: type a sentence, see every number",
        description="Start a local web server with the interactive walkthrough: type a sentence and step "
                    "through every intermediate of its translation (embeddings, attention, probabilities, "
                    "the words generated one by one), or, with a language model, a prompt and its greedy "
                    "continuation (as `lm explain`). Without --checkpoint it uses the latest trained model, "
                    "or with none the lessons' toy model (trained once on first use); the seed examples are "
                    "always there.")
    options.add_checkpoint(parser)
    parser.add_argument("--seeds-only", action="store_true", help="seed examples only, load no model")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    parser.add_argument("--open", action="store_true", help="open the page in the default web browser")
    parser.add_argument("--max-new-tokens", type=int, metavar="N",
                        help=f"a language model: tokens generated (greedy) and explained per prompt "
                             f"(default {SERVER_LM_NEW_TOKENS}, at most {MAX_SERVER_LM_NEW_TOKENS})")
    # The rules translations follow, as `translate` takes them (the page's beam is chosen per request).
    DecodingOptions.add_arguments(parser, only=("alpha", "stop", "brevity", "placeholders", "max_extra"))
    parser.add_argument("--claims", metavar="DIR", default=None,
                        help="folder of `clearformer claims` results (JSON + PNG) to link from their steps "
                             "(default ./claims, where `clearformer claims` writes, when it exists)")
    api = parser.add_argument_group("LibreTranslate API (POST /translate, GET /languages: docs/catalogs.md)")
    api.add_argument("--languages", metavar="SRC:TGT",
                     help="the model's languages, as en:fr (default: what the run's corpus records)")
    api.add_argument("--batch", type=int, default=32, metavar="N",
                     help="at most N sentences of requests arriving together decoded together (default 32; 1: each "
                          "request alone)")
    api.add_argument("--batch-wait", type=float, default=5.0, metavar="MS",
                     help="how long the first sentence waits for others to join its batch (default 5 ms)")
    options.add_threads(api)  # a busy machine decodes faster on fewer threads (BENCHMARKS.md, catalogues section)
    api.add_argument("--batch-queue", type=int, default=4096, metavar="N",
                     help="sentences that may wait to be translated; beyond, a request gets 429, which Weblate "
                          "takes as a rate limit and stops asking for 30 minutes (default 4096: 204 of its "
                          "pages of 20; a request larger than N is taken when nothing waits)")
    parser.set_defaults(func=run)


def batching(args):
    """The LibreTranslate API's settings from the command line, checked."""
    if not 1 <= args.batch <= MAX_BATCH_SIZE:
        raise UserError(f"--batch must be between 1 and {MAX_BATCH_SIZE}, not {args.batch}")
    if not 0 <= args.batch_wait <= 1000:
        raise UserError(f"--batch-wait must be between 0 and 1000 ms, not {args.batch_wait}")
    if not 1 <= args.batch_queue <= 65536:
        raise UserError(f"--batch-queue must be between 1 and 65536, not {args.batch_queue}")
    languages = Languages.parse(args.languages) if args.languages else None
    return Batching(languages, args.batch, args.batch_wait / 1000, args.batch_queue)


def choose_checkpoint(args) -> Path | None:
    """--checkpoint DIR, else the latest trained run, else the lessons' toy model (trained on first use, in a
    child process, into the cache folder; runs/LATEST untouched); None with --seeds-only."""
    if args.seeds_only:
        if args.checkpoint:
            raise UserError("give either --checkpoint or --seeds-only, not both")
        return None
    if args.checkpoint:
        return Path(args.checkpoint)
    if not os.path.lexists(runs_root() / "LATEST"):
        return ensure_toy_model(command="serve")
    return latest_checkpoint()  # a marker pointing to a deleted run is an error, not a silent fallback


def lm_new_tokens(args, loaded) -> int:
    """--max-new-tokens, which only a language model takes."""
    if args.max_new_tokens is None:
        return SERVER_LM_NEW_TOKENS
    if loaded is None or loaded.kind != "lm":
        raise UserError("--max-new-tokens applies to a language model checkpoint (`lm train`, `lm import gpt2`)")
    if not 1 <= args.max_new_tokens <= MAX_SERVER_LM_NEW_TOKENS:
        raise UserError(f"--max-new-tokens must be between 1 and {MAX_SERVER_LM_NEW_TOKENS}, "
                        f"not {args.max_new_tokens}")
    return args.max_new_tokens


def check_port(host: str, port: int) -> None:
    if not 0 < port < 65536:
        raise UserError(f"--port must be between 1 and 65535, not {port}")
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise UserError(f"port {port} on {host} is in use; pass another --port") from None
        raise UserError(f"cannot listen on {host}:{port} ({error.strerror or error})") from None


def api_line(service) -> str:
    """The start-up line of the LibreTranslate API: the languages it translates, or why it translates none."""
    if service is None:
        return "LibreTranslate API: no translation model served"
    if service.languages is None:
        return ("LibreTranslate API: this run records no languages, so /translate answers 400: restart with "
                "--languages SRC:TGT (as en:pt)")
    source, target = service.languages.source, service.languages.target
    return (f"LibreTranslate API: {source} -> {target} at POST /translate (codes such as {target}-XX and "
            f"{target}_XX are read as {target})")


def run(args) -> int:
    try:
        import uvicorn

        from clearformer.serve.app import create_app
        from clearformer.serve.deadline import server_config
        from clearformer.serve.explainer import load
    except ImportError as error:
        raise UserError(f"`clearformer serve` needs fastapi and uvicorn ({error.name} is missing): "
                        "pip install 'clearformer[serve]'") from None
    api = batching(args)  # checked before the model loads
    options.apply_threads(args.threads)
    checkpoint = choose_checkpoint(args)
    loaded = load(checkpoint) if checkpoint is not None else None
    new_tokens = lm_new_tokens(args, loaded)
    check_port(args.host, args.port)
    claims_dir = Path(args.claims or "claims")
    if args.claims and not claims_dir.is_dir():
        raise UserError(f"--claims {args.claims}: no such folder")
    app = create_app(loaded, bound_host=args.host, lm_new_tokens=new_tokens, claims_dir=claims_dir,
                     decoding=DecodingOptions.from_args(args), batching=api)
    shown_host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown_host}:{args.port}/"
    what = "seed examples only (--seeds-only)"
    if loaded:
        what = f"{'language model' if loaded.kind == 'lm' else 'model'} {loaded.path}"
    print(f"clearformer serve: {url}  ({what}; Ctrl+C stops)", file=sys.stderr, flush=True)
    print(f"clearformer serve: {api_line(app.state.translation)}", file=sys.stderr, flush=True)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"clearformer serve: warning: listening on {args.host} makes the page reachable from other "
              "machines", file=sys.stderr)
    if args.open:
        import threading
        import webbrowser

        threading.Timer(1.0, webbrowser.open, [url]).start()
    server = uvicorn.Server(server_config(app, args.host, args.port))  # slow clients let go: serve/deadline.py
    server.run()
    return 0
