/* clearformer front end: beam search as a tree the learner walks step by step (`explain --beam K --html`,
 * and the live page's reruns with a beam).
 *
 * The walkthrough's `beam` (clearformer.explain.beam.BeamTree as JSON) holds, per step, every live hypothesis
 * (its words, its sum of log-probabilities, its parent), its best candidates (log p as the model gave it and as
 * beam search's rules left it, the rule that moved it, and its fate: continues / finishes / stopped / pruned),
 * the finished hypotheses with score = log p / lp(n), and why the search stopped. The tree is plain SVG: one
 * column per step, one node per hypothesis, the translation's path in orange; "Next step" reveals the search
 * one step at a time with that step's table below, and beside the tree the cross-attention of the chosen
 * hypothesis (or of the node clicked) over the source words. Its styles are in BEAM_STYLE (this file only).
 */
(function (CF) {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  const el = (tag, cls, text) => CF.el(tag, cls, text);
  const state = { tree: null, step: 0, selected: null, layer: null, everyCandidate: false };
  const COL = 150;
  const ROW = 46;
  const BEAM_STYLE = `
.cf-beam { margin: 10px 18px 0; padding: 10px 14px; border: 1px solid var(--line); border-radius: 8px; }
.cf-beam h3 { margin: 0 0 6px; font-size: 1.05rem; }
.cf-beam-bar { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; margin-bottom: 6px; font-size: 0.9rem; }
.cf-beam-body { display: flex; flex-wrap: wrap; gap: 14px; align-items: flex-start; }
.cf-beam-body > :first-child { flex: 0 1 auto; max-width: 100%; min-width: 0; }
.cf-beam-body > :nth-child(2) { flex: 1 1 340px; min-width: 0; }
.cf-beam-svg { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; background: #fbfcfd; }
.cf-beam-svg::-webkit-scrollbar { height: 12px; }
.cf-beam-svg::-webkit-scrollbar-thumb { background: #a9b4c2; border-radius: 6px; }
.cf-beam-svg::-webkit-scrollbar-track { background: #eef1f4; }
.cf-beam-node rect { fill: #fff; stroke: #8a96a6; rx: 6; }
.cf-beam-node.cf-chosen rect { stroke: var(--chosen); stroke-width: 2.5; }
.cf-beam-node.cf-finished rect { fill: #eaf7ee; stroke: #2e8b57; }
.cf-beam-node.cf-finished.cf-best rect { fill: #ffe7cf; stroke: var(--chosen); stroke-width: 2.5; }
.cf-beam-node.cf-selected rect { fill: #dbe9ff; }
.cf-beam-node.cf-future { opacity: 0.12; }
.cf-beam-node { cursor: pointer; }
.cf-beam-node text { font-size: 12px; fill: var(--ink); }
.cf-beam-node text.cf-beam-score { fill: var(--muted); font-size: 11px; }
.cf-beam-edge { stroke: #b6c0cc; fill: none; stroke-width: 1.4; }
.cf-beam-edge.cf-chosen { stroke: var(--chosen); stroke-width: 2.5; }
.cf-beam-edge.cf-future { opacity: 0.12; }
.cf-beam-table { border-collapse: collapse; font-size: 0.85rem; margin-top: 8px; }
.cf-beam-table td, .cf-beam-table th { padding: 2px 8px; border-bottom: 1px solid var(--line); text-align: left; }
.cf-beam-table td.cf-num { text-align: right; font-variant-numeric: tabular-nums; }
.cf-beam-cand[data-fate="continues"] { background: #eef5ff; }
.cf-beam-cand[data-fate="finishes"] { background: #eaf7ee; }
.cf-beam-cand[data-fate="pruned"] { color: var(--muted); }
.cf-beam-note { color: var(--muted); font-size: 0.85rem; margin: 4px 0; }
.cf-whatif { margin: 10px 18px 0; padding: 10px 14px; border: 1px solid var(--line); border-radius: 8px; }
.cf-whatif h3 { margin: 0 0 6px; font-size: 1.05rem; }
.cf-whatif-row { display: flex; gap: 6px; align-items: center; flex-wrap: wrap; margin: 3px 0; font-size: 0.85rem; }
.cf-whatif-row .cf-whatif-label { width: 220px; color: var(--muted); }
.cf-whatif button.cf-switch { border: 1px solid #8a96a6; background: #fff; border-radius: 5px; padding: 2px 8px;
  cursor: pointer; font-size: 0.82rem; }
.cf-whatif button.cf-switch[aria-pressed="true"] { background: #b3261e; color: #fff; border-color: #b3261e; }
.cf-whatif-compare { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; margin-top: 8px; }
.cf-whatif-compare > div { padding: 6px 10px; border-radius: 6px; background: var(--panel); }
.cf-whatif-compare .cf-differs { background: #ffe1dc; border-radius: 3px; }
.cf-claim-try { margin-left: 8px; }
`;

  function style() {
    if (document.getElementById("cf-beam-style")) return;
    const tag = document.createElement("style");
    tag.id = "cf-beam-style";
    tag.textContent = BEAM_STYLE;
    document.head.appendChild(tag);
  }
  CF.addBeamStyle = style;

  function svg(tag, attrs, parent) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (parent) parent.appendChild(node);
    return node;
  }

  const fmt = (v, d) => CF.format(v, d === undefined ? 3 : d);
  const lastWord = (h) => (h.words.length ? h.words[h.words.length - 1] : "<bos>");

  /** Node positions: step t in column t, its hypotheses in rows; finished hypotheses in column t + 1 below. */
  function layout(tree) {
    const nodes = [];
    const rowsPerColumn = new Map();
    const place = (column) => { const r = rowsPerColumn.get(column) || 0; rowsPerColumn.set(column, r + 1); return r; };
    for (const step of tree.steps) {
      for (const h of step.hypotheses) {
        nodes.push({ id: h.id, step: step.step, column: step.step, row: place(step.step), label: lastWord(h),
          score: h.total, parent: h.parent, chosen: h.chosen, hypothesis: h, finished: null });
      }
    }
    tree.steps.forEach((step) => step.finished.forEach((f, i) => {
      nodes.push({ id: `${step.step}.f${i}`, step: step.step, column: step.step + 1, row: null, label:
        f.words[f.words.length - 1], score: f.score, parent: f.parent, chosen: f.best, hypothesis: null, finished: f });
    }));
    for (const n of nodes) if (n.row === null) n.row = place(n.column);
    return nodes;
  }

  function drawTree(box) {
    const tree = state.tree;
    const nodes = layout(tree);
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const columns = Math.max(...nodes.map((n) => n.column)) + 1;
    const rows = Math.max(...nodes.map((n) => n.row)) + 1;
    const root = svg("svg", { width: columns * COL + 20, height: rows * ROW + 20, role: "img",
      "aria-label": "beam search tree" });
    const at = (n) => [10 + n.column * COL, 10 + n.row * ROW];
    for (const n of nodes) {
      const parent = byId.get(n.parent);
      if (!parent) continue;
      const [x1, y1] = at(parent);
      const [x2, y2] = at(n);
      const path = svg("path", { d: `M${x1 + 110},${y1 + 17} C${x1 + 130},${y1 + 17} ${x2 - 20},${y2 + 17} ${x2},${y2 + 17}`,
        class: "cf-beam-edge" + (n.chosen && parent.chosen ? " cf-chosen" : "") }, root);
      path.dataset.step = String(n.finished ? n.step : n.step);
    }
    for (const n of nodes) {
      const [x, y] = at(n);
      const classes = ["cf-beam-node", n.chosen ? "cf-chosen" : "", n.finished ? "cf-finished" : "",
        n.finished && n.finished.best ? "cf-best" : ""].filter(Boolean).join(" ");
      const g = svg("g", { class: classes, transform: `translate(${x},${y})`, tabindex: 0 }, root);
      g.dataset.id = n.id;
      g.dataset.step = String(n.step);
      g.dataset.chosen = String(!!n.chosen);
      svg("rect", { width: 110, height: 34, rx: 6 }, g);
      const word = svg("text", { x: 7, y: 14 }, g);
      word.textContent = n.label.length > 14 ? n.label.slice(0, 13) + "…" : n.label;
      const score = svg("text", { x: 7, y: 28, class: "cf-beam-score" }, g);
      score.textContent = n.finished ? `score ${fmt(n.score)}` : `Σ log p ${fmt(n.score)}`;
      const title = svg("title", {}, g);
      title.textContent = n.finished
        ? `finished: ${n.finished.words.join(" ")}\nlog p ${fmt(n.finished.logprob, 4)} / lp ${fmt(n.finished.penalty, 4)}`
          + ` = ${fmt(n.finished.score, 4)} (${n.finished.why})`
        : `${n.hypothesis.words.join(" ") || "<bos>"}\nsum of log-probabilities ${fmt(n.score, 4)}`;
      g.addEventListener("click", () => select(n.finished ? n.parent : n.id));
    }
    box.appendChild(root);
  }

  function reveal() {
    document.querySelectorAll("#cf-beam .cf-beam-node, #cf-beam .cf-beam-edge").forEach((node) => {
      node.classList.toggle("cf-future", Number(node.dataset.step) > state.step);
    });
    document.querySelectorAll("#cf-beam .cf-beam-node.cf-selected").forEach((n) => n.classList.remove("cf-selected"));
    const chosen = document.querySelector(`#cf-beam .cf-beam-node[data-id="${state.selected}"]`);
    if (chosen) chosen.classList.add("cf-selected");
    const steps = state.tree.steps;
    document.getElementById("cf-beam-step").textContent = `step ${CF.counted(state.step)} of ${steps.length}`;  // counted from 1, as everywhere
    document.getElementById("cf-beam-prev").disabled = state.step === 0;
    document.getElementById("cf-beam-next").disabled = state.step === steps.length - 1;
    stepTable(steps[state.step]);
    attention();
  }

  function stepTable(step) {
    const box = document.getElementById("cf-beam-detail");
    box.textContent = "";
    box.appendChild(el("p", "cf-beam-note", `Step ${CF.counted(step.step)}: every live hypothesis is extended by every token; `
      + `the best ${state.tree.beam} extensions that do not end go on. Length penalty lp(${CF.counted(step.step)}) = `
      + `${fmt(step.penalty, 4)}.`));
    const table = el("table", "cf-beam-table");
    table.id = "cf-beam-table";
    const head = el("tr");
    ["hypothesis", "Σ log p", "candidate", "log p", "after rules", "new Σ", "what happens"].forEach((t) => head.appendChild(el("th", "", t)));
    table.appendChild(head);
    const fates = { continues: "goes on", finishes: "finishes", stopped: "kept when the search stopped", pruned: "pruned" };
    for (const h of step.hypotheses) {
      // By default the candidates that matter: those kept or finished, those a rule moved, and the best pruned one.
      const shown = state.everyCandidate ? h.candidates : h.candidates.filter((c, i) => c.fate !== "pruned" || c.rule
        || c === h.candidates.find((d) => d.fate === "pruned") || i === 0);
      shown.forEach((c, i) => {
        const row = el("tr", "cf-beam-cand");
        row.dataset.fate = c.fate;
        row.dataset.hypothesis = h.id;
        row.appendChild(el("td", "", i === 0 ? (h.words.join(" ") || "<bos>") + (h.chosen ? " ★" : "") : ""));
        row.appendChild(el("td", "cf-num", i === 0 ? fmt(h.total) : ""));
        row.appendChild(el("td", "", c.word));
        row.appendChild(el("td", "cf-num", fmt(c.logprob)));
        row.appendChild(el("td", "cf-num", c.adjusted === c.logprob ? "" : fmt(c.adjusted)));
        row.appendChild(el("td", "cf-num", fmt(c.total)));
        row.appendChild(el("td", "", [fates[c.fate], c.rule].filter(Boolean).join("; ")));
        table.appendChild(row);
      });
    }
    box.appendChild(table);
    const every = el("label", "cf-beam-note");
    const check = el("input");
    check.type = "checkbox";
    check.id = "cf-beam-every";
    check.checked = state.everyCandidate;
    check.addEventListener("change", () => { state.everyCandidate = check.checked; stepTable(step); });
    every.appendChild(check);
    every.appendChild(document.createTextNode(` every candidate (the best ${2 * state.tree.beam} of each hypothesis)`));
    box.appendChild(every);
    for (const f of step.finished) {
      box.appendChild(el("p", "cf-beam-note", `finished: ${f.words.join(" ")} — log p ${fmt(f.logprob, 4)} / `
        + `lp ${fmt(f.penalty, 4)} = score ${fmt(f.score, 4)} (${f.why})`));
    }
    if (step.stopped) box.appendChild(el("p", "cf-beam-note", `The search stops: ${step.stopped}.`));
    if (state.step === state.tree.steps.length - 1) {
      const ranking = el("ol", "cf-beam-ranking");
      ranking.id = "cf-beam-ranking";
      state.tree.ranking.forEach((f) => ranking.appendChild(el("li", f.best ? "cf-best" : "",
        `${fmt(f.score, 4)}  ${f.words.join(" ")}${f.best ? "  ← the translation" : ""}`)));
      box.appendChild(el("h4", "", "Finished hypotheses, best score first"));
      box.appendChild(ranking);
    }
  }

  /** Beside the tree: the cross-attention over the source of the translation's hypotheses step by step (rows),
   * at one layer, averaged over the heads; with a node selected, that node's heads instead. */
  function attention() {
    const box = document.getElementById("cf-beam-attention");
    box.textContent = "";
    const tree = state.tree;
    if (!tree.layers) return;
    const nodes = new Map(tree.steps.flatMap((s) => s.hypotheses).map((h) => [h.id, h]));
    const layer = state.layer === null ? tree.layers - 1 : state.layer;
    const select = el("select");
    select.id = "cf-beam-layer";
    for (let l = 0; l < tree.layers; l++) {
      const option = el("option", "", `layer ${l}`);
      option.value = String(l);
      select.appendChild(option);
    }
    select.value = String(layer);
    select.addEventListener("change", () => { state.layer = Number(select.value); attention(); });
    const label = el("label", "", "Cross-attention, ");
    label.appendChild(select);
    box.appendChild(label);
    const mean = (heads) => heads[0].map((_, j) => heads.reduce((s, h) => s + h[j], 0) / heads.length);
    const selected = nodes.get(state.selected);
    let matrix;
    if (selected && !selected.chosen) {
      matrix = { values: selected.attention[layer], row_labels: selected.attention[layer].map((_, h) => `head ${h}`),
        col_labels: tree.source_tokens, head: null, note: "" };
      box.appendChild(el("p", "cf-beam-note", `of “${selected.words.join(" ") || "<bos>"}” choosing its next word`));
    } else {
      const path = tree.chosen_path.map((id) => nodes.get(id)).filter((h) => h.step <= state.step);
      const words = tree.ranking.length ? tree.ranking[0].words : [];
      matrix = { values: path.map((h) => mean(h.attention[layer])), row_labels: path.map((h, i) => words[i] || "?"),
        col_labels: tree.source_tokens, head: null, note: "" };
      box.appendChild(el("p", "cf-beam-note", "of the translation's hypothesis: row = the word it chose, column = "
        + "the source word it read (mean of the heads)"));
    }
    if (!matrix.values.length) return;
    const figure = CF.matrixElement(matrix, { sequential: true, limit: 1, numbers: matrix.values[0].length <= 8 });
    figure.id = "cf-beam-matrix";
    box.appendChild(figure);
  }

  function select(id) {
    state.selected = state.selected === id ? null : id;
    const node = state.tree.steps.flatMap((s) => s.hypotheses).find((h) => h.id === state.selected);
    if (node && node.step > state.step) state.step = node.step;
    reveal();
  }

  CF.beamStep = function (step) {
    if (!state.tree) return;
    state.step = Math.max(0, Math.min(state.tree.steps.length - 1, step));
    reveal();
  };

  CF.drawBeam = function (walk) {
    style();
    let box = document.getElementById("cf-beam");
    if (!walk || !walk.beam) { if (box) box.hidden = true; state.tree = null; return; }
    if (!box) {
      box = el("section", "cf-beam");
      box.id = "cf-beam";
      box.setAttribute("aria-label", "beam search");
      const above = document.getElementById("cf-whatif") || document.getElementById("cf-summary");
      above.parentNode.insertBefore(box, above.nextSibling);  // below the what-if switches, if any
    }
    box.hidden = false;
    box.textContent = "";
    state.tree = walk.beam;
    state.step = 0;
    state.selected = null;
    const tree = walk.beam;
    box.appendChild(el("h3", "", `Beam search, beam ${tree.beam}: the hypotheses it kept, step by step`));
    box.appendChild(el("p", "cf-beam-note", `score = log p / lp(n), lp(n) = ((5 + n) / 6)^${tree.alpha}. `
      + "Orange: the translation's path. Green: finished hypotheses. Click a node to see what it read."));
    if (tree.masked_source) {  // a run that masks placeholders: the tree holds the reserved tokens, not the text
      const masked = el("p", "cf-beam-note", `The search ran on the masked sentence "${tree.masked_source}" and `
        + `wrote "${tree.masked_result}"; each reserved token ｟ph…｠ became its placeholder again after the search: `
        + `"${walk.result}".`);
      masked.id = "cf-beam-masked";
      box.appendChild(masked);
    }
    const bar = el("div", "cf-beam-bar");
    const prev = el("button", "", "◀ Previous step");
    prev.id = "cf-beam-prev";
    prev.type = "button";
    const next = el("button", "", "Next step ▶");
    next.id = "cf-beam-next";
    next.type = "button";
    const all = el("button", "", "Whole search");
    all.id = "cf-beam-all";
    all.type = "button";
    const where = el("span", "cf-position");
    where.id = "cf-beam-step";
    prev.addEventListener("click", () => CF.beamStep(state.step - 1));
    next.addEventListener("click", () => CF.beamStep(state.step + 1));
    all.addEventListener("click", () => CF.beamStep(tree.steps.length - 1));
    [prev, where, next, all].forEach((b) => bar.appendChild(b));
    box.appendChild(bar);
    const body = el("div", "cf-beam-body");
    const left = el("div");
    const picture = el("div", "cf-beam-svg");
    picture.id = "cf-beam-tree";
    left.appendChild(picture);
    const detail = el("div");
    detail.id = "cf-beam-detail";
    left.appendChild(detail);
    const side = el("div");
    side.id = "cf-beam-attention";
    body.appendChild(left);
    body.appendChild(side);
    box.appendChild(body);
    drawTree(picture);
    // A tree wider than its box scrolls sideways: say so beside the scroll bar (an overlay bar hides until
    // hovered), and say it again whenever the window's width changes.
    const more = el("p", "cf-beam-note cf-beam-scroll", "The tree is wider than this box: scroll it sideways →");
    left.insertBefore(more, detail);
    const mark = () => {
      const scrolls = picture.scrollWidth > picture.clientWidth + 1;
      picture.dataset.scrolls = String(scrolls);
      more.hidden = !scrolls;
    };
    mark();
    window.addEventListener("resize", mark);
    reveal();
  };

  // Every walkthrough the page loads (the exported one, a rerun) draws its tree, if it has one.
  const load = CF.load;
  CF.load = function (walk) {
    load(walk);
    CF.drawBeam(walk);
    if (CF.drawWhatif) CF.drawWhatif(walk);
  };
})(window.Clearformer = window.Clearformer || {});
