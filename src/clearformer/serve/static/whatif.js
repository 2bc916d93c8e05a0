/* clearformer front end: what-if experiments. Switch a head off (or give it uniform attention weights), drop
 * the positions or a residual connection, choose a beam, and the sentence runs again through the changed
 * model: every step of the walkthrough is the rerun's, and the translation is shown beside the original.
 *
 * The parts come from the walkthrough itself (the heads of every recorded attention, the positional encodings,
 * the Add & Norms), named as `--ablate` names them (docs/whatif.md). On the live page a change posts
 * {"sentence" (or "prompt"), "ablate": [...], "beam": K} to api/whatif; the exported page cannot run the model,
 * so it shows the `clearformer explain` command that does. Claims 3, 4 and 5 (positions, heads, residuals) get a
 * button that runs their experiment on this sentence.
 */
(function (CF) {
  "use strict";
  const el = (tag, cls, text) => CF.el(tag, cls, text);
  const POSITION_OWNERS = { src_embed: "encoder", tgt_embed: "decoder", embed: "decoder" };
  const state = { text: null, kind: "sentence", active: new Set(), beam: 1, mode: "off", busy: false, walk: null };

  const live = () => !!(CF.config && CF.config.live && CF.config.model);
  const allowed = (name) => !(CF.config && CF.config.whatif && CF.config.whatif.names.length)
    || CF.config.whatif.names.includes(name);

  /** The parts of the model the walkthrough shows: [{label, names: [[button text, name, uniform name]]}]. */
  function parts(walk) {
    const groups = new Map();
    const add = (key, label, item) => {
      if (!allowed(item[1])) return;
      if (!groups.has(key)) groups.set(key, { label: label, items: [] });
      const group = groups.get(key);
      if (!group.items.some((i) => i[1] === item[1])) group.items.push(item);
    };
    for (const step of walk.steps) {
      const name = step.name;
      let match = name.match(/^((encoder|decoder)\.layers\.(\d+)\.(self|cross)_attention)(\.absorbed)?\.weights$/);
      if (match) {
        const heads = step.matrices.filter((m) => m.head !== null).length;
        for (let h = 0; h < heads; h++) {
          add(match[1], `${match[2]} layer ${match[3]} ${match[4]}-attention`,
            [`head ${h}`, `${match[1]}.head.${h}`, `${match[1]}.head.${h}.uniform`]);
        }
        continue;
      }
      match = name.match(/^(\w+)\.positions\.PE$/);
      if (match && POSITION_OWNERS[match[1]]) {
        const owner = POSITION_OWNERS[match[1]];
        add("positions", "positional encoding", [`${owner} positions`, `${owner}.positions`, null]);
        continue;
      }
      match = name.match(/^((encoder|decoder)\.layers\.(\d+)\.add_norm_(\d))\.residual$/);
      if (match) {
        add(`residual-${match[2]}`, `${match[2]} residual connections`,
          [`layer ${match[3]} · ${match[4]}`, `${match[1]}.residual`, null]);
      }
    }
    return [...groups.values()];
  }

  function command() {
    const quoted = `"${state.text.replace(/(["\\$`])/g, "\\$1")}"`;
    const ablate = [...state.active].map((n) => ` --ablate ${n}`).join("");
    const beam = state.beam > 1 ? ` --beam ${state.beam}` : "";
    return state.kind === "prompt" ? `clearformer lm explain ${quoted}${ablate}`
      : `clearformer explain ${quoted}${beam}${ablate} --html whatif.html`;
  }

  function setStatus(text, isError) {
    const box = document.getElementById("cf-whatif-status");
    if (!box) return;
    box.textContent = text;
    box.classList.toggle("cf-error", !!isError);
  }

  async function rerun() {
    if (!live()) {
      const box = document.getElementById("cf-whatif-command");
      box.hidden = false;
      box.textContent = "";
      box.appendChild(document.createTextNode("This page was saved from disk and cannot run the model; run: "));
      box.appendChild(el("code", "", command()));
      return;
    }
    state.busy = true;
    setStatus("running the changed model…");
    const body = { [state.kind]: state.text, ablate: [...state.active] };
    if (state.kind === "sentence") body.beam = state.beam;
    try {
      const response = await fetch("api/whatif", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body) });
      const data = await response.json().catch(() => ({ error: `the server answered ${response.status}` }));
      if (!response.ok) { setStatus(data.error || `error ${response.status}`, true); return; }
      CF.load(data);
      setStatus("");
    } catch (error) {
      setStatus(`could not reach the clearformer server (${error.message})`, true);
    } finally {
      state.busy = false;
    }
  }

  function toggle(name) {
    if (state.active.has(name)) state.active.delete(name);
    else state.active.add(name);
    rerun();
  }

  /** Which words of `ours` are not in a longest common subsequence with `theirs` (the words that differ). */
  function differing(ours, theirs) {
    const table = ours.map(() => new Array(theirs.length + 1).fill(0));
    table.push(new Array(theirs.length + 1).fill(0));
    for (let i = ours.length - 1; i >= 0; i--) {
      for (let j = theirs.length - 1; j >= 0; j--) {
        table[i][j] = ours[i] === theirs[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
      }
    }
    const marked = ours.map(() => true);
    for (let i = 0, j = 0; i < ours.length && j < theirs.length;) {
      if (ours[i] === theirs[j]) { marked[i] = false; i++; j++; } else if (table[i + 1][j] >= table[i][j + 1]) i++; else j++;
    }
    return marked;
  }

  /** The original translation and the changed one side by side, the words that differ marked. */
  function compare(box, walk) {
    const original = walk.original;
    const grid = el("div", "cf-whatif-compare");
    grid.id = "cf-whatif-compare";
    const column = (title, text, other, id) => {
      const cell = el("div");
      cell.appendChild(el("div", "cf-caption", title));
      const words = el("div");
      words.id = id;
      const ours = text.split(/\s+/).filter(Boolean);
      const marked = differing(ours, (other || "").split(/\s+/).filter(Boolean));
      ours.forEach((word, i) => {
        words.appendChild(el("span", marked[i] ? "cf-differs" : "", word));
        words.appendChild(document.createTextNode(" "));
      });
      cell.appendChild(words);
      grid.appendChild(cell);
    };
    column("original model", original.result, walk.result, "cf-whatif-original");
    column(`with --ablate ${walk.ablated.join(" ")}`, walk.result, original.result, "cf-whatif-changed");
    box.appendChild(grid);
  }

  CF.drawWhatif = function (walk) {
    state.walk = walk;
    const text = walk.sentence || state.pendingText;
    let box = document.getElementById("cf-whatif");
    if (!text) { if (box) box.hidden = true; state.text = null; return; }
    if (text !== state.text) state.beam = walk.beam ? walk.beam.beam : 1;
    state.text = text;
    state.kind = walk.model_kind === "lm" ? "prompt" : "sentence";
    state.active = new Set(walk.ablated || []);
    if (!box) {
      box = el("section", "cf-whatif");
      box.id = "cf-whatif";
      box.setAttribute("aria-label", "what if");
      const summary = document.getElementById("cf-summary");
      summary.parentNode.insertBefore(box, summary.nextSibling);
    }
    box.hidden = false;
    box.textContent = "";
    box.appendChild(el("h3", "", "What if? Switch a part of the model off and run the sentence again"));
    const bar = el("div", "cf-whatif-row");
    bar.appendChild(el("span", "cf-whatif-label", "a click on a head"));
    for (const [mode, text2] of [["off", "switches it off"], ["uniform", "makes its weights uniform"]]) {
      const label = el("label", "");
      const radio = el("input");
      radio.type = "radio";
      radio.name = "cf-whatif-mode";
      radio.value = mode;
      radio.checked = state.mode === mode;
      radio.addEventListener("change", () => { state.mode = mode; });
      label.appendChild(radio);
      label.appendChild(document.createTextNode(` ${text2} `));
      bar.appendChild(label);
    }
    if (state.kind === "sentence") {
      const beam = el("select");
      beam.id = "cf-whatif-beam";
      const widest = (CF.config.whatif && CF.config.whatif.max_beam) || 8;
      for (let k = 1; k <= widest; k++) {
        const option = el("option", "", k === 1 ? "greedy" : `beam ${k}`);
        option.value = String(k);
        beam.appendChild(option);
      }
      beam.value = String(state.beam);
      beam.addEventListener("change", () => { state.beam = Number(beam.value); rerun(); });
      const label = el("label", "", "search ");
      label.appendChild(beam);
      bar.appendChild(label);
    }
    const reset = el("button", "cf-switch", "reset");
    reset.type = "button";
    reset.id = "cf-whatif-reset";
    reset.disabled = state.active.size === 0;
    reset.addEventListener("click", () => { state.active.clear(); rerun(); });
    bar.appendChild(reset);
    box.appendChild(bar);
    for (const group of parts(walk)) {
      const row = el("div", "cf-whatif-row");
      row.appendChild(el("span", "cf-whatif-label", group.label));
      for (const [label, name, uniform] of group.items) {
        const on = state.active.has(name) || (uniform && state.active.has(uniform));
        const button = el("button", "cf-switch", label + (uniform && state.active.has(uniform) ? " ≈" : ""));
        button.type = "button";
        button.dataset.ablate = name;
        button.setAttribute("aria-pressed", String(!!on));
        button.title = on ? `${state.active.has(name) ? name : uniform}: click to restore` : name;
        button.addEventListener("click", () => {
          if (state.busy) return;
          if (state.active.has(name)) { toggle(name); return; }
          if (uniform && state.active.has(uniform)) { toggle(uniform); return; }
          toggle(uniform && state.mode === "uniform" ? uniform : name);
        });
        row.appendChild(button);
      }
      box.appendChild(row);
    }
    const status = el("div", "cf-beam-note");
    status.id = "cf-whatif-status";
    box.appendChild(status);
    const commandBox = el("p", "cf-beam-note");
    commandBox.id = "cf-whatif-command";
    commandBox.hidden = true;
    box.appendChild(commandBox);
    if (walk.original && walk.ablated && walk.ablated.length) compare(box, walk);
    const stale = document.getElementById("cf-claim-try");
    if (stale) stale.remove();
    claimButton();  // the step shown was drawn before this walkthrough's sentence was known
  };

  /** Claims 3, 4 and 5: a button under the claim that runs its experiment on this sentence. */
  function claimButton() {
    const walk = state.walk;
    const box = document.getElementById("cf-claim");
    if (!walk || !state.text || !box || box.hidden) return;
    const step = walk.steps[Number(document.getElementById("cf-view").dataset.index)];
    const experiment = step && step.claim && step.claim.experiment;
    if (!experiment) return;
    const head = CF.state && CF.state.head !== "all" ? CF.state.head : "0";
    const name = experiment.ablate.replace("{head}", head);
    if (!allowed(name)) return;
    const button = el("button", "cf-switch cf-claim-try", `Try it on this sentence: ${experiment.label.replace("{head}", head)}`);
    button.type = "button";
    button.id = "cf-claim-try";
    button.dataset.ablate = name;
    button.addEventListener("click", () => { state.active = new Set([name]); rerun(); });
    box.appendChild(button);
  }

  const show = CF.show;
  CF.show = function (index) {
    show(index);
    claimButton();
  };

  // The live form's walkthrough (/api/explain) does not repeat its sentence or prompt: remember what was sent,
  // and forget it when a seed example (no model behind it) is chosen instead.
  document.addEventListener("submit", () => {
    const input = document.getElementById("cf-sentence");
    if (input) state.pendingText = input.value.trim() || null;
  }, true);
  document.addEventListener("change", (event) => {
    if (event.target && event.target.id === "cf-example") state.pendingText = null;
  }, true);
})(window.Clearformer = window.Clearformer || {});
