/* clearformer front end, part 4: the lesson beside the step it explains (`clearformer learn`).
 *
 * The page's data holds `lessons` (clearformer.learn.page.lesson_index): each lesson's title, concept,
 * the recorded step names it explains (regular expressions) and the commands that go further. After
 * every step change this file shows, under the step's explanation, the lessons whose names match:
 * the first one open, the others folded. It wraps CF.show, so walkthrough.js needs no change.
 */
(function (CF) {
  "use strict";
  const el = CF.el;
  let lessons = null;

  function index() {
    if (lessons === null) {
      const raw = document.getElementById("cf-data");
      lessons = (raw ? JSON.parse(raw.textContent).lessons || [] : []).map((lesson) =>
        Object.assign({}, lesson, { patterns: lesson.steps.map((p) => new RegExp(p)),
          leads: (lesson.leads || []).map((p) => new RegExp(p)) }));
    }
    return lessons;
  }

  /** The lessons that explain the step recorded as `name`: the one it leads (page_leads) first, then in order. */
  CF.lessonsFor = (name) => {
    const found = index().filter((lesson) => lesson.patterns.some((p) => p.test(name)));
    const leading = found.filter((lesson) => lesson.leads.some((p) => p.test(name)));
    return [...leading, ...found.filter((lesson) => !leading.includes(lesson))];  // the one opened first
  };

  function style() {
    if (document.getElementById("cf-lesson-style")) return;
    const css = document.createElement("style");
    css.id = "cf-lesson-style";
    css.textContent = ".cf-lesson { margin: 0 0 12px; padding: 6px 10px; border-radius: 4px; background: #eef2fa; "
      + "border-left: 3px solid #5470c6; font-size: 0.92em; } .cf-lesson summary { cursor: pointer; font-weight: 600; }"
      + " .cf-lesson p { margin: 4px 0; } .cf-lesson code { background: #fff; padding: 0 3px; }";
    document.head.appendChild(css);
  }

  function render(step) {
    const box = document.getElementById("cf-lesson");
    if (!box || !step) return;
    box.textContent = "";
    const found = CF.lessonsFor(step.name);
    box.hidden = found.length === 0;
    box.dataset.lessons = found.map((l) => l.number).join(",");
    found.forEach((lesson, i) => {
      const details = el("details", "cf-lesson-item");
      details.open = i === 0;
      details.dataset.lesson = String(lesson.number);
      details.appendChild(el("summary", "", `Lesson ${lesson.number}: ${lesson.title}`));
      details.appendChild(el("p", "cf-lesson-concept", lesson.concept));
      const more = el("p", "cf-caption");
      more.appendChild(document.createTextNode("Go further: "));
      more.appendChild(el("code", "", lesson.command));
      more.appendChild(document.createTextNode(" (a question on your own sentence)"));
      for (const command of lesson.exercises) {
        more.appendChild(document.createTextNode(", "));
        more.appendChild(el("code", "", command));
      }
      more.appendChild(document.createTextNode(", the notebook "));
      more.appendChild(el("code", "", lesson.notebook));
      details.appendChild(more);
      box.appendChild(details);
    });
  }

  const show = CF.show;
  CF.show = function (index) {
    show(index);
    style();
    render(CF.state.walk && CF.state.walk.steps[CF.state.index]);
  };
})(window.Clearformer = window.Clearformer || {});
