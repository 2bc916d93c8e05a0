/* clearformer front end (live page): which words to review. A translation's walkthrough carries `confidence`
 * (serve/confidence.py): the sentence's confidence and every word's, the numbers `clearformer translate
 * --confidence --format json` prints, from the same translator; each word with the generation steps of its pieces.
 *
 *   the words        each coloured by its confidence (orange = low, blue = high, a legend beside), its number on
 *                    hover and focus (title, aria-label); a word under the threshold is also underlined (wavy)
 *                    and marked "!", so colour is never the only sign
 *   the threshold    a number field: a word under it is low
 *   a low word       an active button: opens the logit lens and the attribution (why.js `CF.whyAt`) at the step of
 *                    its weakest piece (the least probable), and the walkthrough at that step when it shows that
 *                    sentence; the other words are buttons too, aria-disabled (focusable, to read their number)
 */
(function (CF) {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => CF.el(tag, cls, text);
  const LOW = [230, 97, 1];    // orange: low confidence   (orange-blue: told apart by colour-blind readers too)
  const HIGH = [33, 102, 172]; // blue: high confidence
  const state = { threshold: null };

  function tint(to, t) {
    const c = to.map((x) => Math.round(255 + (x - 255) * t));
    return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
  }

  /** A confidence in [0, 1] -> its background: orange under 0.5, white at 0.5, blue above (light tints: the word
   *  stays readable in black). */
  CF.confidenceColour = (c) => (c < 0.5 ? tint(LOW, 0.7 * (0.5 - c) * 2) : tint(HIGH, 0.7 * (c - 0.5) * 2));

  const fmt = (c) => CF.format(c, 2);

  function legend(threshold, linked) {
    const box = el("div", "cf-conf-legend");
    box.id = "cf-conf-legend";
    box.appendChild(el("span", "cf-caption", "0"));
    const bar = el("span", "cf-conf-scale");
    bar.setAttribute("aria-hidden", "true");
    const stops = [0, 0.25, 0.5, 0.75, 1].map((c) => `${CF.confidenceColour(c)} ${c * 100}%`);
    bar.style.background = `linear-gradient(to right, ${stops.join(", ")})`;
    const mark = el("span", "cf-conf-scale-mark");
    mark.style.left = `${Math.max(0, Math.min(1, threshold)) * 100}%`;
    bar.appendChild(mark);
    box.appendChild(bar);
    box.appendChild(el("span", "cf-caption", "1"));
    box.appendChild(el("span", "cf-caption", "  orange: low, blue: high; under the threshold (the line) a word is "
      + "also underlined and marked “!”" + (linked ? ": select it for the lens and the attribution of its weakest "
      + "piece" : "")));
    return box;
  }

  function describe(word, low, linked) {
    const pieces = word.steps.length > 1 ? `, ${word.steps.length} pieces, the weakest “${word.weakest_piece}” `
      + `(p ${fmt(word.weakest_probability)}) at generation step ${CF.counted(word.weakest)}`
      : `, generation step ${CF.counted(word.weakest)}`;
    const action = low && linked ? ": low, opens the logit lens and the attribution of that step" : (low ? ": low" : "");
    return `${word.word}: confidence ${fmt(word.confidence)}${pieces}${action}`;
  }

  /** A word: a button (every word takes the keyboard's focus, which shows its number), active when it is low and
   *  its steps can be opened (aria-disabled otherwise: focusable, not a link). */
  function wordElement(word, index, conf, walk) {
    const node = el(conf.linked ? "button" : "span", "cf-conf-word");
    if (conf.linked) node.type = "button";
    else node.tabIndex = 0;
    node.appendChild(document.createTextNode(word.word));
    const mark = node.appendChild(el("span", "cf-conf-mark", "!"));
    mark.setAttribute("aria-hidden", "true");
    node.style.backgroundColor = CF.confidenceColour(word.confidence);
    Object.assign(node.dataset, { index: String(index), confidence: String(word.confidence),
      sentence: String(word.sentence), weakest: String(word.weakest), steps: word.steps.join(" ") });
    if (conf.linked) {
      node.addEventListener("click", () => { if (node.getAttribute("aria-disabled") !== "true") open(word, conf, walk); });
    }
    judge(node, word, conf);
    return node;
  }

  /** A word against the threshold, in place (the element stays, and with it the keyboard's focus). */
  function judge(node, word, conf) {
    const low = word.confidence < state.threshold;
    node.classList.toggle("cf-conf-low", low);
    node.querySelector(".cf-conf-mark").hidden = !low;
    if (conf.linked) node.setAttribute("aria-disabled", String(!low));
    const text = describe(word, low, conf.linked);
    node.title = text;
    node.setAttribute("aria-label", text);
  }

  /** A low word's link: the lens and attribution of its sentence at its weakest piece's step; the walkthrough
   *  jumps to the step that chose that piece when it shows the same sentence. */
  function open(word, conf, walk) {
    const text = conf.sentences[word.sentence];
    const what = `“${word.word}”` + (word.steps.length > 1 ? ` (its weakest piece “${word.weakest_piece}”)` : "");
    if (walk.sentence === text && CF.state && CF.state.byKey) {
      const index = CF.state.byKey.get(`generate.chosen@${word.weakest}`);
      if (index !== undefined) CF.show(index);
    }
    if (CF.whyAt) CF.whyAt(text, word.weakest, conf.beam, what);
  }

  /** The words judged against the threshold, the legend's line and the count: updated when the threshold moves. */
  function paint(walk) {
    const conf = walk.confidence;
    const words = $("cf-conf-words");
    if (!words.childElementCount) {
      conf.words.forEach((word, i) => {
        if (i) words.appendChild(document.createTextNode(" "));
        words.appendChild(wordElement(word, i, conf, walk));
      });
    } else {
      words.querySelectorAll(".cf-conf-word").forEach((node, i) => judge(node, conf.words[i], conf));
    }
    $("cf-conf-legend").replaceWith(legend(state.threshold, conf.linked));
    const low = conf.words.filter((w) => w.confidence < state.threshold).length;
    $("cf-conf-count").textContent = `${low} of ${conf.words.length} words under ${state.threshold}`
      + (conf.linked ? "" : `; ${conf.unlinked}`);
  }

  function render(walk) {
    const old = $("cf-confidence");
    if (old) old.remove();
    const conf = walk && walk.confidence;
    if (!conf) return;
    if (state.threshold === null) state.threshold = conf.threshold;
    const box = el("section", "cf-confidence");
    box.id = "cf-confidence";
    box.setAttribute("aria-label", "confidence");
    const line = el("p", "");
    line.appendChild(el("span", "cf-caption", "confidence: "));
    const value = el("strong", "cf-conf-sentence", conf.confidence === null ? "—" : fmt(conf.confidence));
    value.id = "cf-confidence-value";
    value.dataset.confidence = conf.confidence === null ? "" : String(conf.confidence);
    if (conf.confidence !== null) value.style.backgroundColor = CF.confidenceColour(conf.confidence);
    line.appendChild(value);
    const about = el("span", "cf-caption", `   ${conf.about}`);
    about.id = "cf-confidence-about";
    about.dataset.fitted = String(conf.fitted);
    line.appendChild(about);
    box.appendChild(line);
    const controls = el("div", "cf-conf-controls");
    const label = el("label", "", "low under ");
    const input = el("input");
    input.id = "cf-conf-threshold";
    Object.assign(input, { type: "number", min: "0", max: "1", step: "0.05", value: String(state.threshold) });
    input.addEventListener("change", () => {
      const t = Number(input.value);
      if (input.value === "" || !Number.isFinite(t) || t < 0 || t > 1) { input.value = String(state.threshold); return; }
      if (t === state.threshold) return;
      state.threshold = t;
      paint(walk);
    });
    label.appendChild(input);
    controls.appendChild(label);
    controls.appendChild(el("span", "", "")).id = "cf-conf-legend";
    box.appendChild(controls);
    const words = el("p", "cf-conf-words");
    words.id = "cf-conf-words";
    box.appendChild(words);
    box.appendChild(el("p", "cf-caption", "")).id = "cf-conf-count";
    $("cf-summary").appendChild(box);
    paint(walk);
  }

  const load = CF.load;
  CF.load = function (walk) {  // every walkthrough the page shows (a sentence, a what-if rerun) shows its confidence
    load(walk);
    render(walk);
  };
})(window.Clearformer = window.Clearformer || {});
