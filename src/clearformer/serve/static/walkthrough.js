/* clearformer front end, part 2: walk through a walkthrough's steps in the order the model computed them.
 *
 * A walkthrough (the JSON of clearformer.explain.walkthrough.Walkthrough) is a list of steps:
 * tokens -> ids -> embeddings -> + PE -> Q, K, V -> scores -> scaled -> softmax -> output -> concat
 * and W_O -> Add & Norm -> FFN -> ... -> decoder steps -> probabilities -> chosen word.
 * Previous/next buttons and the arrow keys move through them; the layer, head and generation-step
 * selectors jump to the same step elsewhere; the side panel shows the translation growing word by
 * word with its cross-attention alignment. A language model's walkthrough (model_kind "lm": source_tokens
 * are the prompt, target_tokens the prompt then the generated tokens, generation step 0 reads the whole
 * prompt) shows the continuation growing token by token with its self-attention instead.
 */
(function (CF) {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const el = CF.el;
  const state = { walk: null, index: 0, head: "all", byKey: new Map(), chosen: new Map(), timer: null };

  const key = (name, decodeStep) => `${name}@${decodeStep === null ? "" : decodeStep}`;
  const sequential = (step) => /\.(weights|mask|probabilities)$/.test(step.name);
  const isLM = () => state.walk.model_kind === "lm";
  /** Where the generated tokens start in target_tokens: after <bos> (translation), after the prompt (LM). */
  const firstGenerated = () => (isLM() ? state.walk.source_tokens.length : 1);
  const chosenWord = (t) => state.walk.target_tokens[firstGenerated() + t];

  function groupLabel(step) {
    if (step.decode_step !== null) {
      const word = chosenWord(step.decode_step);
      return `Generation step ${CF.counted(step.decode_step)}` +  // counted from 1, as everywhere (docs/learn.md)
         (word !== undefined ? ` → ${word}` : "");
    }
    const stage = step.stage.replace(/_/g, " ");
    return stage.charAt(0).toUpperCase() + stage.slice(1) + (step.layer !== null ? `, layer ${step.layer}` : "");
  }

  function buildNav() {
    const nav = $("cf-nav");
    nav.textContent = "";
    let group = null;
    let label = null;
    state.walk.steps.forEach((step, index) => {
      const here = groupLabel(step);
      if (here !== label) {
        label = here;
        group = el("details", "cf-group");
        group.appendChild(el("summary", "", here));
        nav.appendChild(group);
      }
      const button = el("button", "cf-nav-step", `${CF.counted(index)}. ${step.title}`);
      button.type = "button";
      button.dataset.index = String(index);
      button.title = step.name;
      group.appendChild(button);
    });
  }

  function fillSelect(select, options, value) {
    select.textContent = "";
    for (const [optionValue, text] of options) {
      const option = el("option", "", text);
      option.value = optionValue;
      select.appendChild(option);
    }
    select.value = value;
    select.disabled = options.length < 2;
  }

  function toolbar(step) {
    const steps = state.walk.steps;
    $("cf-position").textContent = `Step ${CF.counted(state.index)} of ${steps.length}`;
    $("cf-prev").disabled = state.index === 0;
    $("cf-next").disabled = state.index === steps.length - 1;
    const layers = [...new Set(steps.filter((s) => s.stage === step.stage && s.decode_step === step.decode_step
      && s.layer !== null).map((s) => s.layer))].sort((a, b) => a - b);
    fillSelect($("cf-layer"), step.layer === null ? [["", "—"]] : layers.map((l) => [String(l), String(l)]),
      step.layer === null ? "" : String(step.layer));
    const heads = step.matrices.filter((m) => m.head !== null).map((m) => m.head);
    const headOptions = heads.length > 1 ? [["all", "all"], ...heads.map((h) => [String(h), String(h)])]
      : [["all", heads.length ? String(heads[0]) : "—"]];
    fillSelect($("cf-head"), headOptions, heads.includes(Number(state.head)) ? state.head : "all");
    const decodeSteps = generationSteps();
    $("cf-decode-label").hidden = decodeSteps.length === 0;
    $("cf-play").hidden = decodeSteps.length === 0;
    fillSelect($("cf-decode"), [["", isLM() ? "—" : "encoder (source)"], ...decodeSteps.map((t) =>
      [String(t), `${CF.counted(t)} → ${chosenWord(t) || "?"}`])],
    step.decode_step === null ? "" : String(step.decode_step));
  }

  const generationSteps = () => [...state.chosen.keys()].filter((k) => typeof k === "number");

  function findStep(name, decodeStep) {
    const index = state.byKey.get(key(name, decodeStep));
    return index === undefined ? -1 : index;
  }

  function blockedFor(step) {
    if (!step.name.endsWith(".weights")) return null;
    const index = findStep(step.name.replace(/weights$/, "mask"), step.decode_step);
    if (index < 0) return null;
    return state.walk.steps[index].matrices[0].values.map((row) => row.map((v) => v === 0));
  }

  function renderMatrices(step) {
    const box = $("cf-matrices");
    box.textContent = "";
    if (step.kind === "ids") { box.appendChild(CF.idsElement(step)); return; }
    if (step.kind === "distribution") {
      const chosen = state.chosen.get(step.decode_step === null ? "none" : step.decode_step);
      box.appendChild(CF.distributionElement(step.matrices[0], chosen));
      return;
    }
    const blocked = blockedFor(step);
    for (const matrix of step.matrices) {
      if (state.head !== "all" && matrix.head !== null && String(matrix.head) !== state.head) continue;
      const limit = /\.(weights|mask)$/.test(step.name) ? 1 : undefined;
      box.appendChild(CF.matrixElement(matrix, { sequential: sequential(step), blocked: blocked, limit: limit }));
    }
  }

  function averaged(matrices) {
    const first = matrices[0];
    const values = first.values.map((row, i) => row.map((_, j) =>
      matrices.reduce((sum, m) => sum + m.values[i][j], 0) / matrices.length));
    return { values: values, row_labels: first.row_labels, col_labels: first.col_labels, head: null, note: "" };
  }

  /** The side panel: the source, the words produced so far, and the cross-attention alignment growing. */
  /** Whether `matrix` with its numbers written in (46 px a column in the side panel) fits `panel`'s width: the
   *  panel is beside the step view (wide windows) or below it (1280 px and less). */
  const fits = (panel, matrix) => (matrix.values[0] || []).length * 48 + 80 <= (panel.clientWidth || 330);

  function renderGeneration(step) {
    const panel = $("cf-generation");
    panel.textContent = "";
    const walk = state.walk;
    const generating = generationSteps().length > 0;
    panel.hidden = !generating;
    document.querySelector(".cf-main").classList.toggle("cf-no-generation", !generating);
    if (!generating) return;
    if (isLM()) { renderContinuation(panel, step); return; }
    panel.appendChild(el("h3", "", "Translation, word by word"));
    const source = el("div", "cf-tokens");
    walk.source_tokens.forEach((t) => source.appendChild(el("span", "cf-token" + (t === "<unk>" ? " cf-unknown" : ""), t)));
    panel.appendChild(el("div", "cf-caption", "source (encoder input)"));
    panel.appendChild(source);
    if (walk.source_tokens.includes("<unk>")) {  // the words the model did not know, named
      const words = (walk.unknown || []).join(", ");
      panel.appendChild(el("p", "cf-caption cf-unknown-note", "Unknown to the model, read as <unk>"
        + (words ? `: ${words}` : "") + " (`clearformer learn --vocab` lists the words it knows)."));
    }
    const t = step.decode_step;
    const target = el("div", "cf-tokens");
    target.id = "cf-produced";
    panel.appendChild(el("div", "cf-caption", "produced so far"));
    panel.appendChild(target);
    if (t === null) {
      target.appendChild(el("span", "cf-token cf-pending", "…"));
      panel.appendChild(el("p", "cf-caption", "The encoder reads the whole source first; generation starts after it."));
      return;
    }
    const revealed = state.index >= findStep("generate.chosen", t);
    const produced = walk.target_tokens.slice(1, t + 1 + (revealed ? 1 : 0));
    produced.forEach((word, i) => target.appendChild(el("span", "cf-token" + (i === t ? " cf-new" : ""), word)));
    if (!revealed) target.appendChild(el("span", "cf-token cf-pending", "?"));
    const layers = walk.steps.filter((s) => s.decode_step === t && s.name.endsWith("cross_attention.weights"));
    if (!layers.length) return;
    const chosenLayer = layers.find((s) => s.layer === step.layer && step.stage === "decoder") || layers[layers.length - 1];
    const heads = chosenLayer.matrices;
    const one = heads.find((m) => String(m.head) === state.head);
    const matrix = Object.assign({}, one || averaged(heads));
    // Rows labelled by the decoder's input at each position, as the main cross-attention matrix labels them.
    matrix.row_labels = matrix.values.map((_, i) => walk.target_tokens[i]);
    matrix.head = null;
    const how = one ? `head ${one.head}` : "mean of the heads";
    const layerText = chosenLayer.layer === null ? "" : `, layer ${chosenLayer.layer}`;
    panel.appendChild(el("h4", "", `Cross-attention alignment${layerText} (${how})`));
    const figure = CF.matrixElement(matrix, { sequential: true, limit: 1, numbers: fits(panel, matrix) });
    figure.id = "cf-alignment";
    panel.appendChild(figure);
    panel.appendChild(el("p", "cf-caption", "Row: the decoder's input at that position (it produces the next word). "
      + "Column: the source word it looks at. A row is added as each word is produced."));
  }

  /** A language model's side panel: the prompt, the tokens generated so far, and the masked self-attention
   * of the tokens read so far (one row more per token fed back), at the current layer or the last one. */
  function renderContinuation(panel, step) {
    const walk = state.walk;
    panel.appendChild(el("h3", "", "Continuation, token by token"));
    const prompt = el("div", "cf-tokens");
    walk.source_tokens.forEach((t) => prompt.appendChild(el("span", "cf-token", t)));
    panel.appendChild(el("div", "cf-caption", "prompt"));
    panel.appendChild(prompt);
    const target = el("div", "cf-tokens");
    target.id = "cf-produced";
    panel.appendChild(el("div", "cf-caption", "generated so far"));
    panel.appendChild(target);
    const generated = walk.target_tokens.slice(firstGenerated());
    const t = step.decode_step;
    const revealed = t === null || state.index >= findStep("generate.chosen", t);
    const shown = t === null ? generated : generated.slice(0, t + (revealed ? 1 : 0));
    shown.forEach((word, i) => target.appendChild(el("span", "cf-token" + (i === t ? " cf-new" : ""), word)));
    if (!revealed) target.appendChild(el("span", "cf-token cf-pending", "?"));
    const last = generationSteps().length - 1;
    const at = t === null ? last : t;
    const layers = walk.steps.filter((s) => s.decode_step === at && /self_attention(\.absorbed)?\.weights$/.test(s.name));
    if (!layers.length) return;
    const chosenLayer = layers.find((s) => s.layer === step.layer) || layers[layers.length - 1];
    const heads = chosenLayer.matrices;
    const one = heads.find((m) => String(m.head) === state.head);
    const matrix = Object.assign({}, one || averaged(heads), { head: null });
    const how = one ? `head ${one.head}` : "mean of the heads";
    panel.appendChild(el("h4", "", `Masked self-attention, layer ${chosenLayer.layer} (${how})`));
    const figure = CF.matrixElement(matrix, { sequential: true, limit: 1, blocked: blockedFor(chosenLayer),
      numbers: fits(panel, matrix) });  // a prompt and its continuation: the panel stays narrow
    figure.id = "cf-alignment";
    panel.appendChild(figure);
    panel.appendChild(el("p", "cf-caption", "Row: a token read so far. Column: the token it looks at (itself or an "
      + "earlier one: the mask blanks the rest). A row is added as each generated token is fed back."));
  }

  /** The `clearformer claims` experiment that measures what the tutorials say about this step, if any. */
  function renderClaim(step) {
    const box = $("cf-claim");
    box.textContent = "";
    const claim = step.claim;
    box.hidden = !claim;
    if (!claim) return;
    box.dataset.claim = String(claim.number);
    box.appendChild(el("strong", "", `Claim ${claim.number} measured: `));
    box.appendChild(document.createTextNode(`“${claim.statement}” — run `));
    box.appendChild(el("code", "", claim.command));
    box.appendChild(document.createTextNode("; the result and its figure: "));
    // docs/claims.md where the page can reach it (CF.config.docs: the server's copy, or the checkout's file for
    // an exported page); otherwise the section is named without a link, never a broken one.
    const docs = CF.config && CF.config.docs;
    const link = el(docs ? "a" : "code", "", claim.docs);
    if (docs) link.href = docs + claim.docs.slice(claim.docs.indexOf("#"));
    box.appendChild(link);
    const measured = (CF.config && CF.config.claims || {})[String(claim.number)];
    if (!measured) return;  // the live server found this claim's results (`clearformer claims N`)
    box.appendChild(document.createTextNode("; measured on this server's machine: "));
    for (const [key, text] of [["figure", "figure"], ["json", "numbers (JSON)"]]) {
      const result = el("a", "cf-claim-result", text);
      result.href = measured[key];
      result.target = "_blank";
      box.appendChild(result);
      if (key === "figure") box.appendChild(document.createTextNode(", "));
    }
  }

  CF.show = function (index) {
    const steps = state.walk.steps;
    state.index = Math.max(0, Math.min(steps.length - 1, index));
    const step = steps[state.index];
    const view = $("cf-view");
    view.dataset.stepName = step.name;
    view.dataset.decodeStep = step.decode_step === null ? "" : String(step.decode_step);
    view.dataset.index = String(state.index);
    $("cf-title").textContent = step.title;
    $("cf-formula").textContent = step.formula;
    $("cf-formula").hidden = !step.formula;
    $("cf-explanation").textContent = step.explanation;
    renderClaim(step);
    const where = [groupLabel(step), step.sublayer ? step.sublayer.replace(/_/g, " ") : ""].filter(Boolean);
    $("cf-where").textContent = where.join(" · ") + "   ";
    $("cf-where").appendChild(el("code", "", step.name));
    toolbar(step);
    renderMatrices(step);
    renderGeneration(step);
    document.querySelectorAll(".cf-nav-step.cf-active").forEach((b) => b.classList.remove("cf-active"));
    const button = document.querySelector(`.cf-nav-step[data-index="${state.index}"]`);
    if (button) {
      button.classList.add("cf-active");
      document.querySelectorAll(".cf-group[open]").forEach((g) => { if (g !== button.parentElement) g.open = false; });
      button.parentElement.open = true;
      const nav = $("cf-nav");  // keep the current step in the middle of the list, with its neighbours
      nav.scrollTop += button.getBoundingClientRect().top - nav.getBoundingClientRect().top - nav.clientHeight / 2;
    }
  };

  CF.next = () => CF.show(state.index + 1);
  CF.prev = () => CF.show(state.index - 1);

  function summary(walk) {
    const box = $("cf-summary");
    box.textContent = "";
    box.appendChild(el("h1", "", walk.title));
    const line = el("p", "");
    line.appendChild(el("span", "cf-caption", walk.model_kind === "lm" ? "prompt: " : "source: "));
    line.appendChild(document.createTextNode(walk.source_tokens.join(" ")));
    if (walk.result) {
      line.appendChild(el("span", "cf-caption", "   result: "));
      line.appendChild(el("strong", "", walk.result)).id = "cf-result";
    }
    box.appendChild(line);
    if (walk.masked_source) {  // placeholders masked before the model, restored after (tokenize/placeholders.py)
      const masked = el("p", "");
      masked.id = "cf-masked";
      masked.appendChild(el("span", "cf-caption", "the model read: "));
      masked.appendChild(document.createTextNode(walk.masked_source));
      masked.appendChild(el("span", "cf-caption", "   it wrote: "));
      masked.appendChild(document.createTextNode(walk.masked_result));
      box.appendChild(masked);
    }
  }

  CF.load = function (walk) {
    CF.stop();
    state.walk = walk;
    state.byKey = new Map();
    state.chosen = new Map();
    walk.steps.forEach((step, index) => {
      state.byKey.set(key(step.name, step.decode_step), index);
      if (step.name === "generate.chosen") {
        state.chosen.set(step.decode_step === null ? "none" : step.decode_step, step.matrices[0].note);
      }
    });
    summary(walk);
    buildNav();
    CF.show(0);
  };

  function jumpLayer(layer) {
    const step = state.walk.steps[state.index];
    const name = step.name.replace(/layers\.\d+/, `layers.${layer}`);
    let index = findStep(name, step.decode_step);
    if (index < 0) {
      index = state.walk.steps.findIndex((s) => s.stage === step.stage && s.layer === layer
        && s.decode_step === step.decode_step);
    }
    if (index >= 0) CF.show(index);
  }

  function jumpDecode(value) {
    const step = state.walk.steps[state.index];
    const t = value === "" ? null : Number(value);
    let index = step.decode_step !== null && t !== null ? findStep(step.name, t) : -1;
    if (index < 0) index = state.walk.steps.findIndex((s) => s.decode_step === t);
    if (index >= 0) CF.show(index);
  }

  /** Play the generation: jump from one chosen word to the next. */
  CF.play = function () {
    if (state.timer) { CF.stop(); return; }
    const chosenIndexes = state.walk.steps.map((s, i) => (s.name === "generate.chosen" ? i : -1)).filter((i) => i >= 0);
    if (!chosenIndexes.length) return;
    $("cf-play").textContent = "❚❚ Pause";
    const tick = () => {
      const next = chosenIndexes.find((i) => i > state.index);
      if (next === undefined) { CF.stop(); return; }
      CF.show(next);
    };
    if (!chosenIndexes.some((i) => i > state.index)) CF.show(0);
    tick();
    state.timer = window.setInterval(tick, 1100);
  };

  CF.stop = function () {
    if (state.timer) window.clearInterval(state.timer);
    state.timer = null;
    const button = $("cf-play");
    if (button) button.textContent = "▶ Play generation";
  };

  CF.state = state;

  CF.start = function (walk) {
    $("cf-prev").addEventListener("click", () => { CF.stop(); CF.prev(); });
    $("cf-next").addEventListener("click", () => { CF.stop(); CF.next(); });
    $("cf-play").addEventListener("click", () => CF.play());
    $("cf-layer").addEventListener("change", (e) => { if (e.target.value !== "") jumpLayer(Number(e.target.value)); });
    $("cf-head").addEventListener("change", (e) => { state.head = e.target.value; CF.show(state.index); });
    $("cf-decode").addEventListener("change", (e) => jumpDecode(e.target.value));
    $("cf-nav").addEventListener("click", (e) => {
      const button = e.target.closest(".cf-nav-step");
      if (button) { CF.stop(); CF.show(Number(button.dataset.index)); }
    });
    document.addEventListener("keydown", (e) => {
      if (!state.walk || e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.target.closest && e.target.closest("input, textarea, select")) return;
      const moves = { ArrowRight: () => CF.next(), ArrowLeft: () => CF.prev(), Home: () => CF.show(0),
        End: () => CF.show(state.walk.steps.length - 1) };
      if (moves[e.key]) { e.preventDefault(); CF.stop(); moves[e.key](); }
    });
    CF.attachTooltip($("cf-tooltip"));
    if (walk) CF.load(walk);
  };

  document.addEventListener("DOMContentLoaded", () => {
    const data = JSON.parse($("cf-data").textContent);
    CF.config = data.config || {};
    CF.start(data.walk);
    if (CF.startLive) CF.startLive(CF.config);
  });
})(window.Clearformer = window.Clearformer || {});
