"""Regenerate the README's images in docs/: real figures and a screenshot of the live page.

    .venv/bin/python docs/make_images.py [--checkpoint DIR] [--sentence "I love you"]

Uses the latest trained checkpoint by default (`clearformer train --preset toy-translate`), draws the
figures with `clearformer.explain.plots`, starts the app on a free loopback port, types the sentence
in headless chromium (Debian's package, driven by Playwright) and screenshots the page. Every PNG is
palette-compressed to stay well under 300 KB.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

from PIL import Image

DOCS = Path(__file__).resolve().parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
MAX_BYTES = 300_000


def compress(path: Path) -> None:
    """Quantise a PNG to a 256-colour palette (figures and UI screenshots lose nothing visible)."""
    image = Image.open(path).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    if path.stat().st_size > MAX_BYTES:
        raise SystemExit(f"{path}: {path.stat().st_size} bytes, over {MAX_BYTES}")


def figures(walk, final_layer: int) -> list[Path]:
    from clearformer.explain.plots import write_plots

    chosen = {"positional_encoding.png": "figure-positional-encoding.png",
              f"attention_cross_layer{final_layer}.png": "figure-cross-attention.png",
              "attention_decoder_self_layer0.png": "figure-masked-self-attention.png",
              "probabilities_step00.png": "figure-probabilities-step0.png"}
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        for path in write_plots(walk, Path(scratch)):
            if path.name in chosen:
                target = DOCS / chosen[path.name]
                shutil.copyfile(path, target)
                compress(target)
                written.append(target)
    return written


def screenshot(loaded, sentence: str, final_layer: int) -> Path:
    import uvicorn
    from playwright.sync_api import sync_playwright

    from clearformer.serve.app import create_app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(create_app(loaded), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.1)
    target = DOCS / "walkthrough-page.png"
    whatif = DOCS / "whatif-page.png"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            page = browser.new_page(viewport={"width": 1440, "height": 860})
            page.goto(f"http://127.0.0.1:{port}/")
            page.fill("#cf-sentence", sentence)
            page.click("#cf-explain")
            page.wait_for_function("document.querySelector('#cf-summary h1').textContent"
                                   ".startsWith('Translating')")
            last = page.evaluate("Math.max(...Clearformer.state.walk.steps.map(s => s.decode_step ?? -1))")
            page.select_option("#cf-decode", str(last))
            name = f"decoder.layers.{final_layer}.cross_attention.weights"
            page.locator(f'.cf-nav-step[title="{name}"]').last.click()
            page.hover('#cf-matrices .cf-matrix[data-head="0"] .cf-cell[data-row="1"][data-col="1"]')
            page.screenshot(path=target)
            # What-if: a head of the last decoder layer's cross-attention switched off, beam 4.
            head = f"decoder.layers.{final_layer}.cross_attention.head.0"
            page.mouse.move(0, 0)
            page.click(f'#cf-whatif button[data-ablate="{head}"]')
            page.wait_for_selector("#cf-whatif-compare")
            page.select_option("#cf-whatif-beam", "4")
            page.wait_for_selector("#cf-beam .cf-beam-node")
            page.screenshot(path=whatif, full_page=True)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    compress(target)
    compress(whatif)
    return target


def main() -> None:
    from clearformer.explain.translation import explain_translation
    from clearformer.serve.explainer import load
    from clearformer.store.runs import resolve_checkpoint

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="checkpoint directory (default: the latest trained)")
    parser.add_argument("--sentence", default="I love you")
    args = parser.parse_args()
    loaded = load(resolve_checkpoint(args.checkpoint))
    final_layer = loaded.model.config.n_decoder_layers - 1
    walk = explain_translation(loaded.model, loaded.tokenizer, args.sentence)
    print(f"{args.sentence!r} -> {walk.result!r}")
    for path in [*figures(walk, final_layer), screenshot(loaded, args.sentence, final_layer),
                 DOCS / "whatif-page.png"]:
        print(f"wrote {path} ({path.stat().st_size // 1000} KB)")


if __name__ == "__main__":
    main()
