/* clearformer front end: why did it say that. Three views of the sentence on the page, each from the server's
 * POST api/why (serve/why.py, the JSON of `clearformer lens`, `patch` and `attribute --format json`):
 *
 *   the logit lens      layers x generation steps: the token each decoder layer would choose, coloured by the
 *                       probability it gives the token finally chosen
 *   patching            two sentences: the share of the clean translation's log-probability that copying one
 *                       point of the clean run into the corrupted run restores (encoder layers x source
 *                       positions, every head, every decoder layer, the encoder output)
 *   attribution         for a chosen target word: integrated gradients (or gradient x input) per source word,
 *                       beside the cross-attention weights
 *
 * The exported page cannot run the model: it shows the commands that print the same numbers.
 */
(function (CF) {
  "use strict";
  const el = (tag, cls, text) => CF.el(tag, cls, text);
  const $ = (id) => document.getElementById(id);
  const live = () => !!(CF.config && CF.config.live && CF.config.model);
  const state = { attribution: null };

  function quoted(text) { return `"${text.replace(/(["\\$`])/g, "\\$1")}"`; }

  function sentence() {
    const walk = CF.state && CF.state.walk;
    const typed = $("cf-sentence") && $("cf-sentence").value.trim();
    return typed || (walk && walk.sentence) || (walk && walk.source_tokens.filter((t) => t !== "<eos>").join(" ")) || "";
  }

  function status(text, isError) {
    const box = $("cf-why-status");
    box.textContent = text;
    box.classList.toggle("cf-error", !!isError);
  }

  async function ask(body, what) {
    status(`${what}…`);
    try {
      const response = await fetch("api/why", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      });
      const data = await response.json().catch(() => ({ error: `the server answered ${response.status}` }));
      if (!response.ok) { status(data.error || `error ${response.status}`, true); return null; }
      status("");
      return data;
    } catch (error) {
      status(`could not reach the clearformer server (${error.message})`, true);
      return null;
    }
  }

  /** The lens: a heatmap of p(chosen) by layer and step, the top token of each layer written under it;
   *  `focus` (a step, from 0): that step's column marked (a low-confidence word's link, confidence.js). */
  CF.lensElement = function (report, focus) {
    const box = el("div", "cf-why-lens");
    const focused = Number.isInteger(focus) && focus < report.steps.length;
    if (focused) box.dataset.focusStep = String(focus);
    const layers = report.steps.length ? report.steps[0].layers.length : 0;
    const rows = [];
    for (let l = 0; l < layers; l++) rows.push(report.steps.map((s) => s.layers[l].p_chosen));
    box.appendChild(CF.matrixElement({
      values: rows, row_labels: rows.map((_, l) => `layer ${l}`), col_labels: report.steps.map((s) => s.chosen),
      head: null, note: "p(chosen token) if the decoder stopped after that layer",
    }, { sequential: true, limit: 1, caption: "logit lens" }));
    if (focused) {
      box.querySelectorAll(`.cf-cell[data-col="${focus}"]`).forEach((cell) => cell.classList.add("cf-why-focus"));
    }
    const table = el("table", "cf-why-tops");
    const head = el("tr");
    head.appendChild(el("th", "", "top token"));
    report.steps.forEach((s, t) => head.appendChild(el("th", t === focus ? "cf-why-focus" : "", s.chosen)));
    table.appendChild(head);
    for (let l = 0; l < layers; l++) {
      const row = el("tr");
      row.appendChild(el("th", "", `layer ${l}`));
      report.steps.forEach((s, t) => {
        const top = s.layers[l].top;
        row.appendChild(el("td", (top === s.chosen ? "cf-why-same" : "cf-why-other") + (t === focus ? " cf-why-focus" : ""),
          top));
      });
      table.appendChild(row);
    }
    box.appendChild(table);
    box.appendChild(el("p", "cf-caption", `result: ${report.result}`));
    return box;
  };

  /** Patching: encoder layers x source positions, attention modules x heads, and the whole-stack points. */
  CF.patchElement = function (report) {
    const box = el("div", "cf-why-patch");
    const restored = new Map(report.points.map((p) => [p.name, p.restored]));
    const layers = new Set();
    const modules = new Map();
    const whole = [];
    for (const p of report.points) {
      let m = p.name.match(/^encoder\.layers\.(\d+)\.output\[(\d+)\]$/);
      if (m) { layers.add(Number(m[1])); continue; }
      m = p.name.match(/^(.*)\.head\.(\d+)$/);
      if (m) {
        if (!modules.has(m[1])) modules.set(m[1], []);
        modules.get(m[1])[Number(m[2])] = p.restored;
        continue;
      }
      whole.push(p);
    }
    const source = report.source_tokens;
    const layerRows = [...layers].sort((a, b) => a - b);
    box.appendChild(el("p", "cf-caption", `${report.clean} → ${report.translation}   (corrupted: ${report.corrupted}). `
      + "1 = copying that point alone from the clean run restores the whole clean translation's log-probability."));
    box.appendChild(CF.matrixElement({
      values: layerRows.map((l) => source.map((_, p) => restored.get(`encoder.layers.${l}.output[${p}]`))),
      row_labels: layerRows.map((l) => `encoder layer ${l}`), col_labels: source, head: null, note: "",
    }, { caption: "encoder layer output at one source position", limit: 1 }));
    const names = [...modules.keys()];
    const heads = Math.max(...names.map((n) => modules.get(n).length));
    box.appendChild(CF.matrixElement({
      values: names.map((n) => modules.get(n)), row_labels: names,
      col_labels: Array.from({ length: heads }, (_, h) => `head ${h}`), head: null, note: "",
    }, { caption: "one attention head's output", limit: 1 }));
    box.appendChild(CF.matrixElement({
      values: [whole.map((p) => p.restored)], row_labels: ["restored"], col_labels: whole.map((p) => p.name),
      head: null, note: "",
    }, { caption: "a whole stack's output", limit: 1 }));
    return box;
  };

  /** Attribution beside cross-attention for target word `j`. */
  CF.attributionElement = function (report, j) {
    const box = el("div", "cf-why-attribution");
    const rows = [report.scores[j]];
    const labels = [report.method];
    if (report.attention && report.method !== "attention") { rows.push(report.attention[j]); labels.push("cross-attention"); }
    const scaled = rows.map((row) => {
      const max = Math.max(...row.map((x) => Math.abs(x))) || 1;
      return row.map((x) => x / max);
    });
    box.appendChild(CF.matrixElement({
      values: scaled, row_labels: labels, col_labels: report.source_tokens, head: null,
      note: "each row divided by its largest |value|",
    }, { caption: `source words behind “${report.target_tokens[j]}”`, limit: 1 }));
    if (report.completeness) {  // integrated gradients: the scores of word j sum to how far its output moved
      const c = (report.completeness.per_target || [])[j] || report.completeness;
      const line = el("p", "cf-caption cf-why-completeness", `completeness for “${report.target_tokens[j]}”: its `
        + `scores sum to ${CF.format(c.sum, 4)}; its output moved ${CF.format(c.difference, 4)} from the `
        + `baseline (${report.baseline}, ${report.steps} steps)`);
      line.dataset.sum = String(c.sum);
      line.dataset.difference = String(c.difference);
      box.appendChild(line);
    }
    box.appendChild(el("p", "cf-caption", `alignments (Pharaoh): ${report.alignments.join(" ")}`));
    return box;
  };

  function showAttribution(report, j, before) {
    state.attribution = report;
    const pick = $("cf-why-target");
    pick.replaceChildren();
    report.target_tokens.forEach((token, k) => {
      const option = el("option", "", `${CF.counted(k)}: ${token}`);
      option.value = String(k);
      pick.appendChild(option);
    });
    pick.value = String(j || 0);
    pick.hidden = false;
    $("cf-why-out").replaceChildren(...(before || []), CF.attributionElement(report, j || 0));
  }

  /** The lens and the attribution of `text`'s translation (beam `beam`), both opened at generation step `step`
   *  (from 0): where a low-confidence word links (confidence.js). `what` says which word and piece. */
  CF.whyAt = async function (text, step, beam, what) {
    const box = $("cf-why");
    if (!box || !live()) return;
    const body = beam > 1 ? { sentence: text, beam: beam } : { sentence: text };
    const [lens, attribution] = await Promise.all([
      ask(Object.assign({ tool: "lens" }, body), "Running the logit lens"),
      ask(Object.assign({ tool: "attribute", method: $("cf-why-method").value }, body), "Attributing"),
    ]);
    if (!lens || !attribution) return;
    const caption = el("p", "cf-caption cf-why-at", `${what}: the logit lens and the attribution of generation step `
      + `${CF.counted(step)}` + (beam > 1 ? ` (beam ${beam})` : ""));
    caption.dataset.step = String(step);
    showAttribution(attribution, step, [caption, CF.lensElement(lens, step)]);
    box.scrollIntoView({ block: "start" });
    $("cf-why-target").focus({ preventScroll: true });
  };

  function panel() {
    const box = el("section", "cf-why");
    box.id = "cf-why";
    box.setAttribute("aria-label", "why did it say that");
    box.appendChild(el("h2", "", "Why did it say that?"));
    const controls = el("div", "cf-why-controls");
    const lens = el("button", "", "Logit lens");
    lens.id = "cf-why-lens";
    lens.type = "button";
    const corrupted = el("input");
    corrupted.id = "cf-why-corrupted";
    corrupted.placeholder = "the same sentence with one word changed";
    corrupted.setAttribute("aria-label", "corrupted sentence");
    const patch = el("button", "", "Patch");
    patch.id = "cf-why-patch";
    patch.type = "button";
    const method = el("select");
    method.id = "cf-why-method";
    for (const m of ["integrated-gradients", "gradient-x-input", "attention"]) {
      const option = el("option", "", m);
      option.value = m;
      method.appendChild(option);
    }
    const attribute = el("button", "", "Attribute");
    attribute.id = "cf-why-attribute";
    attribute.type = "button";
    const target = el("select");
    target.id = "cf-why-target";
    target.hidden = true;
    target.setAttribute("aria-label", "target word");
    controls.append(lens, corrupted, patch, method, attribute, target);
    box.appendChild(controls);
    const note = el("div", "cf-status");
    note.id = "cf-why-status";
    box.appendChild(note);
    const out = el("div", "cf-why-out");
    out.id = "cf-why-out";
    box.appendChild(out);
    lens.addEventListener("click", async () => {
      const data = await ask({ tool: "lens", [CF.config.model.kind === "lm" ? "prompt" : "sentence"]: sentence() },
        "Running the logit lens");
      if (data) out.replaceChildren(CF.lensElement(data));
    });
    patch.addEventListener("click", async () => {
      const data = await ask({ tool: "patch", sentence: sentence(), corrupted: corrupted.value.trim() }, "Patching");
      if (data) out.replaceChildren(CF.patchElement(data));
    });
    attribute.addEventListener("click", async () => {
      const data = await ask({ tool: "attribute", sentence: sentence(), method: method.value }, "Attributing");
      if (data) showAttribution(data);
    });
    target.addEventListener("change", () => {  // only the attribution changes (a lens opened beside it stays)
      const shown = out.querySelector(".cf-why-attribution");
      if (state.attribution && shown) shown.replaceWith(CF.attributionElement(state.attribution, Number(target.value)));
    });
    return box;
  }

  function exportedNote() {
    const box = el("section", "cf-why");
    box.id = "cf-why";
    box.appendChild(el("h2", "", "Why did it say that?"));
    const text = sentence();
    box.appendChild(el("p", "cf-caption", "This exported page cannot run the model; these commands print the "
      + "logit lens, patching and attribution of this sentence (or open it with `clearformer serve`):"));
    for (const c of [`clearformer lens ${quoted(text)}`, `clearformer patch ${quoted(text)} "<the same sentence, one word changed>"`,
      `clearformer attribute ${quoted(text)} --alignments`]) box.appendChild(el("pre", "cf-formula", c));
    return box;
  }

  document.addEventListener("DOMContentLoaded", () => {
    const main = document.querySelector(".cf-main");
    const walk = CF.state && CF.state.walk;
    if (!main || !CF.config) return;
    if (live()) main.after(panel());
    else if (!CF.config.live && walk && walk.model_kind !== "lm" && walk.result) main.after(exportedNote());
  });
})(window.Clearformer = window.Clearformer || {});
