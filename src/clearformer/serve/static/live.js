/* clearformer front end, part 3 (live page only): type a sentence, ask the local server, show its walkthrough.
 *
 * POST /api/explain {"sentence": "..."} (a translation model), {"prompt": "..."} (a language model, which
 * continues it by a few greedy tokens) or {"example": "i-love-you"} -> the walkthrough JSON, or
 * {"error": "..."} with a 4xx status. The exported HTML file does not include this script.
 */
(function (CF) {
  "use strict";
  const $ = (id) => document.getElementById(id);

  function status(text, isError) {
    const box = $("cf-status");
    box.textContent = text;
    box.classList.toggle("cf-error", !!isError);
  }

  async function explain(body, what) {
    status(`${what}…`);
    $("cf-explain").disabled = true;
    try {
      const response = await fetch("api/explain", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      });
      const data = await response.json().catch(() => ({ error: `the server answered ${response.status}` }));
      if (!response.ok) { status(data.error || `error ${response.status}`, true); return; }
      CF.load(data);
      status(data.result ? `Done: ${data.result}` : "Done.");
    } catch (error) {
      status(`could not reach the clearformer server (${error.message})`, true);
    } finally {
      $("cf-explain").disabled = !CF.config.model;
    }
  }

  CF.startLive = function (config) {
    if (!config.live) return;
    const form = $("cf-form");
    form.hidden = false;
    const select = $("cf-example");
    for (const name of config.examples || []) {
      const option = document.createElement("option");
      option.value = name;
      option.textContent = name;
      select.appendChild(option);
    }
    if (config.notice) {
      const notice = $("cf-notice");
      notice.textContent = config.notice;
      notice.hidden = false;
    }
    const lm = !!config.model && config.model.kind === "lm";
    if (!config.model) {
      $("cf-sentence").disabled = true;
      $("cf-explain").disabled = true;
      $("cf-sentence").placeholder = "no trained model: choose a seed example";
    } else if (lm) {
      $("cf-sentence").placeholder = `Type a prompt for ${config.model.name} to continue, e.g. The dog ran`;
      $("cf-sentence").setAttribute("aria-label", "prompt to continue");
      $("cf-explain").textContent = `Continue (${config.model.max_new_tokens} tokens) and explain`;
    } else {
      $("cf-sentence").placeholder = `Type a sentence to translate (model: ${config.model.name}), e.g. I love you`;
    }
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = $("cf-sentence").value.trim();
      if (!text) { status(lm ? "type a prompt first" : "type a sentence first", true); return; }
      if (lm) explain({ prompt: text }, `Continuing “${text}”`);
      else explain({ sentence: text }, `Translating “${text}”`);
    });
    select.addEventListener("change", () => {
      if (select.value) explain({ example: select.value }, `Loading ${select.value}`);
    });
  };
})(window.Clearformer = window.Clearformer || {});
