/* clearformer front end, part 1: draw one walkthrough matrix as a heatmap, a bar chart or token chips.
 *
 * Every cell carries its exact number in data-value (the walkthrough JSON's float, unrounded) and
 * shows it rounded; hovering shows row label, column label and the exact number. Plain DOM + CSS
 * grid: no library, so the exported page works offline.
 */
(function (CF) {
  "use strict";

  const SEQ_END = [8, 81, 156];        // white -> dark blue for non-negative data (weights, probabilities)
  const DIV_LOW = [33, 102, 172];      // blue <- white -> red for signed data, symmetric around 0
  const DIV_HIGH = [178, 24, 43];

  /** The one way the page counts steps, generation steps and menu entries: from 1 (as the terminal and the
   *  lessons do). `index` counts from 0, as the walkthrough's JSON does. */
  CF.counted = (index) => index + 1;

  CF.format = function (value, decimals) {
    if (value === null || value === undefined || !Number.isFinite(value)) return "—";
    return value.toFixed(decimals === undefined ? 4 : decimals);
  };

  function mix(to, t) {
    const c = to.map((x) => Math.round(255 + (x - 255) * t));
    return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
  }

  /** Scale for a matrix: sequential from 0 for non-negative data, else diverging around 0; `limit` fixes
   *  the top of the scale (1 for attention weights, so a flat row looks flat), else the largest |value|. */
  CF.scaleFor = function (rows, sequential, limit) {
    if (limit) return { sequential: sequential, max: limit };
    let max = 0;
    for (const row of rows) for (const v of row) if (Number.isFinite(v)) max = Math.max(max, Math.abs(v));
    return { sequential: sequential, max: max || 1 };
  };

  /** [background, strong] for a value under a scale; strong = dark background (use white text). */
  CF.colorFor = function (value, scale) {
    if (value === null || !Number.isFinite(value)) return ["#d9d9d9", false];
    const t = Math.max(-1, Math.min(1, value / scale.max));
    if (scale.sequential) return [mix(SEQ_END, Math.max(0, t)), t > 0.55];
    return [mix(t >= 0 ? DIV_HIGH : DIV_LOW, Math.abs(t)), Math.abs(t) > 0.55];
  };

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  CF.el = el;

  /**
   * A matrix as a CSS grid heatmap.
   * options: sequential (bool), limit (top of the colour scale, default the largest |value|),
   *          blocked (rows of bool: masked cells, drawn hatched), caption (string),
   *          numbers (bool: write the rounded numbers into the cells).
   */
  CF.matrixElement = function (matrix, options) {
    const opts = options || {};
    const rows = matrix.values;
    const nCols = rows.length ? rows[0].length : 0;
    // numbers in the cells where a row of them fits the step view at 1100 px (12 x --cell-w); wider: colours, hover
    const numbers = opts.numbers !== undefined ? opts.numbers : nCols <= 12 && rows.length <= 32;
    const scale = CF.scaleFor(rows, !!opts.sequential, opts.limit);
    const box = el("figure", "cf-matrix");
    if (matrix.head !== null && matrix.head !== undefined) box.dataset.head = String(matrix.head);
    const caption = [opts.caption, matrix.head !== null && matrix.head !== undefined ? `head ${matrix.head}` : "",
      `${rows.length} × ${nCols}`, matrix.note].filter(Boolean).join(" · ");
    box.appendChild(el("figcaption", "", caption));
    const grid = el("div", "cf-grid" + (numbers ? " cf-numbers" : " cf-dense"));
    // Wide matrices (d_model, d_ff columns) get narrow cells so that a whole row fits on screen.
    const dense = `${Math.max(4, Math.min(14, Math.floor(760 / Math.max(1, nCols))))}px`;
    // Numbered cells are at least --cell-w wide and as wide as their column's label (never cut short).
    grid.style.gridTemplateColumns = `max-content repeat(${nCols}, ${numbers ? "minmax(var(--cell-w), max-content)"
      : dense})`;
    grid.appendChild(el("div", "cf-corner"));
    const colLabels = matrix.col_labels || [];
    // Narrow cells label every k-th column only, k so that a label (about 6 px a character) never runs into the
    // next one; the grid keeps room on its right for the last label.
    const longest = Math.max(1, ...colLabels.map((l) => String(l).length));
    const every = numbers ? 1 : Math.max(nCols > 24 ? 8 : 1, Math.ceil((longest * 6 + 4) / parseInt(dense, 10)));
    if (!numbers) grid.style.paddingRight = `${longest * 6}px`;
    for (let j = 0; j < nCols; j++) {
      const label = colLabels[j] !== undefined ? colLabels[j] : String(j);
      const head = el("div", "cf-col-label", j % every ? "" : label);
      head.title = label;
      grid.appendChild(head);
    }
    rows.forEach((row, i) => {
      const label = (matrix.row_labels || [])[i];
      const rowHead = el("div", "cf-row-label", label !== undefined ? label : String(i));
      grid.appendChild(rowHead);
      row.forEach((value, j) => {
        const cell = el("div", "cf-cell");
        cell.dataset.row = String(i);
        cell.dataset.col = String(j);
        cell.dataset.value = value === null ? "" : String(value);
        cell.dataset.rowLabel = rowHead.textContent;
        cell.dataset.colLabel = colLabels[j] !== undefined ? colLabels[j] : String(j);
        if (opts.blocked && opts.blocked[i] && opts.blocked[i][j]) {
          cell.classList.add("cf-blocked");
          cell.dataset.blocked = "1";
        } else {
          const [background, strong] = CF.colorFor(value, scale);
          cell.style.background = background;
          if (strong) cell.classList.add("cf-strong");
          if (numbers) cell.textContent = CF.format(value, 4);
        }
        grid.appendChild(cell);
      });
    });
    box.appendChild(grid);
    box.appendChild(CF.legendElement(scale, !!opts.blocked));
    return box;
  };

  /** The colour legend of a heatmap: the scale's gradient with its ends (and the hatch of masked cells). */
  CF.legendElement = function (scale, blocked) {
    const legend = el("div", "cf-legend");
    legend.setAttribute("aria-label", "colour legend");
    const low = scale.sequential ? 0 : -scale.max;
    const stops = scale.sequential ? [0, 0.5, 1] : [-1, -0.5, 0, 0.5, 1];
    const bar = el("span", "cf-legend-bar");
    bar.style.background = `linear-gradient(to right, ${stops.map((t) => CF.colorFor(t * scale.max, scale)[0])
      .join(", ")})`;
    legend.append(el("span", "cf-legend-end", CF.format(low, 2)), bar, el("span", "cf-legend-end",
      CF.format(scale.max, 2)));
    legend.dataset.low = String(low);
    legend.dataset.high = String(scale.max);
    if (blocked) {
      const hatch = el("span", "cf-legend-hatch");
      legend.append(hatch, el("span", "cf-legend-end", "blocked by the mask"));
    }
    return legend;
  };

  /** An output distribution as horizontal bars; `chosen` (a label) is highlighted. */
  CF.distributionElement = function (matrix, chosen) {
    const box = el("figure", "cf-distribution");
    const after = (matrix.row_labels || []).join(" ");
    box.appendChild(el("figcaption", "", [`next word after “${after}”`, matrix.note].filter(Boolean).join(" · ")));
    const values = matrix.values[0] || [];
    const max = Math.max(1e-12, ...values.filter(Number.isFinite));
    values.forEach((value, j) => {
      const label = matrix.col_labels[j];
      const row = el("div", "cf-bar-row" + (label === chosen ? " cf-chosen" : ""));
      row.dataset.value = value === null ? "" : String(value);
      row.dataset.label = label;
      row.dataset.col = String(j);
      row.appendChild(el("span", "cf-bar-label", label));
      const track = el("span", "cf-bar-track");
      const fill = el("span", "cf-bar-fill");
      fill.style.width = `${Math.max(0, (value || 0) / max) * 100}%`;
      track.appendChild(fill);
      row.appendChild(track);
      row.appendChild(el("span", "cf-bar-value", CF.format(value, 4)));
      box.appendChild(row);
    });
    return box;
  };

  /** Token ids as chips (token over id); a chosen token as one large chip. */
  CF.idsElement = function (step) {
    const box = el("div", "cf-ids");
    const matrix = step.matrices[0];
    (matrix.values[0] || []).forEach((value, j) => {
      const chip = el("div", "cf-chip" + (step.name.endsWith("chosen") ? " cf-chip-chosen" : ""));
      chip.dataset.value = String(value);
      chip.appendChild(el("span", "cf-chip-token", matrix.col_labels[j]));
      chip.appendChild(el("span", "cf-chip-id", `id ${value}`));
      box.appendChild(chip);
    });
    return box;
  };

  /** One tooltip for the whole page, fed by the data attributes of the hovered cell or bar. */
  CF.attachTooltip = function (tooltip) {
    document.addEventListener("mouseover", (event) => {
      const cell = event.target.closest && event.target.closest(".cf-cell, .cf-bar-row");
      if (!cell) { tooltip.hidden = true; return; }
      let text;
      if (cell.classList.contains("cf-bar-row")) {
        text = `p(${cell.dataset.label}) = ${cell.dataset.value}`;
      } else {
        text = `${cell.dataset.rowLabel} · ${cell.dataset.colLabel} = ${cell.dataset.value || "not a number"}`;
        if (cell.dataset.blocked) text += "  (blocked by the mask: -∞ before the softmax)";
      }
      tooltip.textContent = text;
      tooltip.hidden = false;
    });
    document.addEventListener("mousemove", (event) => {
      if (tooltip.hidden) return;
      tooltip.style.left = `${Math.min(event.clientX + 14, window.innerWidth - tooltip.offsetWidth - 8)}px`;
      tooltip.style.top = `${event.clientY + 16}px`;
    });
  };
})(window.Clearformer = window.Clearformer || {});
