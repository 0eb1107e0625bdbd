// minigrad explorer: step through the backward pass on a graph that Graphviz laid out.
//
// The data (minigrad/viz/explore.py) says, for each moment k = 0..N of the backward pass
// (moment 0: the seed dL/dL = 1; moment k: the k-th node ran its backward):
//   steps[k - 1]      the item whose node ran, and what it computes
//   items[key]        details of each node of the picture; received = [first, last], the
//                     moments at which its gradient began to arrive and was complete
//   arrows[i]         each arrow of the picture: the moments its edges carried a gradient,
//                     and the norm of each (label text as draw_graph writes it)
//   shortcuts[j]      each sum y = x + F(x): the skip edge and the branch's edges back to x
"use strict";

const data = JSON.parse(document.getElementById("explorer-data").textContent);
const svg = document.querySelector("#graph svg");
const slider = document.getElementById("step");
const last = data.steps.length;
let moment = 0;
let selected = null;
let player = null;

// -- the SVG: find each item and arrow, keep each label's original text -------------------

const nodeElements = {};
for (const g of svg.querySelectorAll("g.node")) {
  const title = g.querySelector("title");
  const key = title ? title.textContent : "";
  if (title) title.remove(); // (a tooltip showing "n12" helps no one)
  if (key in data.items) {
    g.dataset.key = key;
    nodeElements[key] = g;
  }
}

for (const arrow of data.arrows) {
  arrow.element = document.getElementById(arrow.id);
  if (!arrow.element) continue;
  const title = arrow.element.querySelector(":scope > title");
  if (title) title.remove();
  arrow.texts = Array.from(arrow.element.querySelectorAll(":scope > text"));
  arrow.indents = arrow.texts.map((text) => text.textContent.match(/^[\s\u00a0]*/)[0]);
}

// -- what each arrow says at a moment ---------------------------------------------------

function labelRows(arrow, k) {
  // the rows draw_graph writes: one norm per edge (up to 3), else "N edges: low … high"
  const norms = arrow.norms;
  if (norms.length <= 3) return norms.map(([m, text]) => (m !== null && m <= k ? text : ""));
  const done = norms.filter(([m]) => m !== null && m <= k);
  if (done.length === 0) return [""];
  const byValue = done.filter(([, , value]) => value !== null);
  byValue.sort((a, b) => a[2] - b[2]);
  const low = byValue.length ? byValue[0][1] : "?";
  const high = byValue.length ? byValue[byValue.length - 1][1] : "?";
  const count = done.length === norms.length ? `${done.length}` : `${done.length}/${norms.length}`;
  return [`${count} edges: ${low} \u2026 ${high}`];
}

function showArrow(arrow, k) {
  if (!arrow.element) return;
  const total = arrow.moments.length;
  const flowed = arrow.moments.filter((m) => m <= k).length;
  const classes = arrow.element.classList;
  classes.toggle("future", data.hasGrads && total > 0 && flowed === 0);
  classes.toggle("now", data.hasGrads && k > 0 && arrow.moments.includes(k));
  if (!data.hasGrads) return;
  labelRows(arrow, k).forEach((row, index) => {
    const text = arrow.texts[arrow.rows + index];
    if (text) text.textContent = row ? arrow.indents[arrow.rows + index] + row : "";
  });
}

function stateOf(item, k) {
  if (!data.hasGrads || !item.received) return "";
  const [first, complete] = item.received;
  if (k < first) return "pending";
  return k < complete ? "partial" : "received";
}

function show(k) {
  moment = Math.max(0, Math.min(last, k));
  slider.value = moment;
  const current = moment > 0 ? data.steps[moment - 1] : null;
  for (const [key, g] of Object.entries(nodeElements)) {
    const state = stateOf(data.items[key], moment);
    for (const name of ["pending", "partial", "received"]) g.classList.toggle(name, state === name);
    g.classList.toggle("current", current !== null && current.item === key);
  }
  for (const arrow of data.arrows) showArrow(arrow, moment);
  document.getElementById("moment").textContent = momentText(current);
  showShortcuts(moment);
  if (selected) showPanel(selected);
  if (current && document.getElementById("follow").checked) keepInView(current.item);
}

function momentText(current) {
  if (!data.hasGrads) return "";
  if (!current) return `moment 0 of ${last}: dL/dL = 1 is seeded at the output`;
  return `moment ${moment} of ${last}: ${current.text} ran its backward`;
}

// -- the stepper ---------------------------------------------------------------------------

function stop() {
  if (player !== null) clearInterval(player);
  player = null;
  document.getElementById("play").textContent = "\u25B6 play";
}

function play() {
  if (player !== null) return stop();
  if (moment >= last) show(0);
  const every = Math.max(40, Math.min(400, 8000 / Math.max(last, 1)));
  player = setInterval(() => (moment >= last ? stop() : show(moment + 1)), every);
  document.getElementById("play").textContent = "\u2016 pause";
}

function setUpStepper() {
  slider.max = last;
  slider.disabled = !data.hasGrads;
  for (const id of ["first", "back", "play", "forward", "last"]) {
    document.getElementById(id).disabled = !data.hasGrads;
  }
  slider.addEventListener("input", () => show(Number(slider.value)));
  document.getElementById("first").onclick = () => (stop(), show(0));
  document.getElementById("back").onclick = () => (stop(), show(moment - 1));
  document.getElementById("forward").onclick = () => (stop(), show(moment + 1));
  document.getElementById("last").onclick = () => (stop(), show(last));
  document.getElementById("play").onclick = play;
  document.addEventListener("keydown", (event) => {
    if (!data.hasGrads || event.target.tagName === "INPUT") return;
    const moves = { ArrowLeft: moment - 1, ArrowRight: moment + 1, Home: 0, End: last };
    if (event.key in moves) (stop(), show(moves[event.key]));
    else if (event.key === " ") play();
    else return;
    event.preventDefault();
  });
}

// -- pan and zoom: the SVG's viewBox ----------------------------------------------------------

const whole = svg.viewBox.baseVal;
let view = { x: whole.x, y: whole.y, w: whole.width, h: whole.height };
const home = { ...view };
svg.removeAttribute("width");
svg.removeAttribute("height");

function setView(next) {
  view = next;
  svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
}

function svgPoint(clientX, clientY) {
  const point = svg.createSVGPoint();
  point.x = clientX;
  point.y = clientY;
  return point.matrixTransform(svg.getScreenCTM().inverse());
}

function zoom(factor, clientX, clientY) {
  const box = svg.getBoundingClientRect();
  const at = svgPoint(clientX ?? box.left + box.width / 2, clientY ?? box.top + box.height / 2);
  const w = Math.min(home.w * 4, Math.max(home.w / 60, view.w * factor));
  const scale = w / view.w;
  setView({ x: at.x - (at.x - view.x) * scale, y: at.y - (at.y - view.y) * scale, w, h: view.h * scale });
}

function keepInView(key) {
  const g = nodeElements[key];
  if (!g) return;
  const box = g.getBoundingClientRect();
  const area = svg.getBoundingClientRect();
  const inside = box.left >= area.left && box.right <= area.right &&
    box.top >= area.top && box.bottom <= area.bottom;
  if (inside) return;
  const centre = svgPoint(box.left + box.width / 2, box.top + box.height / 2);
  setView({ ...view, x: centre.x - view.w / 2, y: centre.y - view.h / 2 });
}

function setUpPanZoom() {
  const area = document.getElementById("graph");
  let drag = null;
  area.addEventListener("wheel", (event) => {
    event.preventDefault();
    zoom(Math.exp(event.deltaY * 0.0015), event.clientX, event.clientY);
  }, { passive: false });
  area.addEventListener("pointerdown", (event) => {
    drag = { x: event.clientX, y: event.clientY, start: svgPoint(event.clientX, event.clientY), moved: false };
  });
  area.addEventListener("pointermove", (event) => {
    if (!drag) return;
    if (Math.abs(event.clientX - drag.x) + Math.abs(event.clientY - drag.y) > 4) {
      drag.moved = true;
      area.classList.add("dragging");
    }
    if (!drag.moved) return;
    const now = svgPoint(event.clientX, event.clientY);
    setView({ ...view, x: view.x + drag.start.x - now.x, y: view.y + drag.start.y - now.y });
  });
  const end = (event) => {
    const click = drag && !drag.moved;
    drag = null;
    area.classList.remove("dragging");
    const g = click ? event.target.closest("g.node") : null;
    if (g && g.dataset.key) select(g.dataset.key);
  };
  area.addEventListener("pointerup", end);
  area.addEventListener("pointerleave", () => { drag = null; area.classList.remove("dragging"); });
  document.getElementById("zoom-in").onclick = () => zoom(1 / 1.4);
  document.getElementById("zoom-out").onclick = () => zoom(1.4);
  document.getElementById("fit").onclick = () => setView({ ...home });
}

function startView() {
  // readable from the start (about 0.9 pixels per point), centred where backward begins
  const area = svg.getBoundingClientRect();
  const w = Math.min(home.w, area.width / 0.9);
  const h = Math.min(home.h, area.height / 0.9);
  if (w >= home.w && h >= home.h) return;
  setView({ x: view.x, y: view.y, w, h });
  keepInView(last > 0 ? data.steps[0].item : Object.keys(nodeElements)[0]);
}

// -- pictures: heatmaps and histograms on canvases -------------------------------------------

function bytesOf(base64) {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

function diverging(t) {
  // t in [-1, 1]: blue (negative), white (0), red (positive)
  const [r, g, b] = t < 0 ? [59, 76, 192] : [180, 4, 38];
  const a = Math.min(1, Math.abs(t));
  return `rgb(${Math.round(255 + (r - 255) * a)},${Math.round(255 + (g - 255) * a)},${Math.round(255 + (b - 255) * a)})`;
}

function sequential(t) {
  // t in [0, 1]: white to dark purple
  return `rgb(${Math.round(255 - 187 * t)},${Math.round(255 - 255 * t)},${Math.round(255 - 87 * t)})`;
}

function heatmap(rows, cols, valueAt, colour, labels = {}) {
  // a canvas of rows x cols cells; labels.rows / labels.cols name the rows and columns
  const cell = Math.max(2, Math.min(18, Math.floor(300 / Math.max(cols, rows / 1.5))));
  const left = labels.rows ? 46 : 0;
  const top = labels.cols ? 40 : 0;
  const canvas = document.createElement("canvas");
  canvas.width = left + cols * cell;
  canvas.height = top + rows * cell;
  const context = canvas.getContext("2d");
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      context.fillStyle = colour(r, c);
      context.fillRect(left + c * cell, top + r * cell, cell, cell);
    }
  }
  context.fillStyle = "#333";
  context.font = `${Math.min(12, Math.max(8, cell - 2))}px sans-serif`;
  context.textBaseline = "middle";
  (labels.rows || []).forEach((label, r) => {
    context.textAlign = "right";
    context.fillText(label, left - 4, top + (r + 0.5) * cell, left - 6);
  });
  (labels.cols || []).forEach((label, c) => {
    context.save();
    context.translate(left + (c + 0.5) * cell, top - 4);
    context.rotate(-Math.PI / 3);
    context.textAlign = "left";
    context.fillText(label, 0, 0, 40);
    context.restore();
  });
  canvas.addEventListener("mousemove", (event) => {
    const box = canvas.getBoundingClientRect();
    const c = Math.floor((event.clientX - box.left - left) / cell);
    const r = Math.floor((event.clientY - box.top - top) / cell);
    canvas.title = r >= 0 && c >= 0 && r < rows && c < cols ? valueAt(r, c) : "";
  });
  return canvas;
}

function matrixCanvas(summary) {
  const bytes = bytesOf(summary.data);
  const level = (r, c) => (bytes[r * summary.cols + c] - 128) / 127;
  return heatmap(
    summary.rows, summary.cols,
    (r, c) => `row ${r}, column ${c}: ${format(level(r, c) * summary.scale)}`,
    (r, c) => diverging(level(r, c)),
    { rows: summary.rowLabels },
  );
}

function histogramCanvas(histogram) {
  const canvas = document.createElement("canvas");
  canvas.width = 300;
  canvas.height = 70;
  const context = canvas.getContext("2d");
  const most = Math.max(...histogram.counts, 1);
  const width = canvas.width / histogram.counts.length;
  context.fillStyle = "#6a7fb5";
  histogram.counts.forEach((count, i) => {
    const height = (count / most) * 54;
    context.fillRect(i * width + 1, 56 - height, width - 2, height);
  });
  context.fillStyle = "#333";
  context.font = "10px sans-serif";
  context.textAlign = "left";
  context.fillText(format(histogram.low), 0, 68);
  context.textAlign = "right";
  context.fillText(format(histogram.high), canvas.width, 68);
  return canvas;
}

function format(value) {
  if (value === null || value === undefined) return "?";
  if (value === 0) return "0";
  const size = Math.abs(value);
  return size >= 1e4 || size < 1e-3 ? value.toExponential(2) : Number(value.toPrecision(3)).toString();
}

// -- the panel: what a clicked node is ----------------------------------------------------

function element(tag, text, attributes = {}) {
  const made = document.createElement(tag);
  if (text !== undefined && text !== null) made.textContent = text;
  for (const [name, value] of Object.entries(attributes)) made.setAttribute(name, value);
  return made;
}

function fields(list, rows) {
  for (const [field, label, value] of rows) {
    if (value === undefined || value === null || value === "") continue;
    list.append(element("dt", label), element("dd", value, { "data-field": field }));
  }
}

function select(key) {
  if (selected && nodeElements[selected]) nodeElements[selected].classList.remove("selected");
  selected = key;
  if (nodeElements[key]) nodeElements[key].classList.add("selected");
  showPanel(key);
}

function showPanel(key) {
  const item = data.items[key];
  const panel = document.getElementById("panel");
  panel.replaceChildren();
  panel.dataset.key = key;
  const name = item.kind === "op" ? item.equation || item.op : item.name;
  panel.append(element("h2", name, { "data-field": "title" }));
  const list = element("dl");
  panel.append(list);
  const kinds = { param: "parameter", leaf: "leaf tensor (requires grad)", constant: "constant", output: "output" };
  fields(list, [
    ["op", "op", item.op],
    ["equation", "computes", item.equation],
    ["module", "module", item.module && `${item.module} (${item.moduleType})`],
    ["kind", "kind", kinds[item.kind] || (item.kind === "module" ? `module ${item.moduleType}` : null)],
    ["path", "path", item.kind === "param" ? item.name : null],
    ["copies", "drawn for", item.copies && item.copies.length ? `${item.copies.join(", ")} (the values are ${item.copies[0]}'s)` : null],
    ["shape", "shape", item.shape],
    ["dtype", "dtype", item.dtype],
    ["bytes", "size", item.bytes],
    ["saved", "saved for backward", item.saved],
    ["ran", "ran backward at", item.ran ? `moment ${item.ran}` : null],
    ["ops", "ops inside", item.ops],
    ["params", "parameters inside", item.params],
  ]);
  if (item.inputs && item.inputs.length) {
    panel.append(element("h3", "inputs"));
    const inputs = element("dl");
    item.inputs.forEach(([what, shape, dtype], i) =>
      inputs.append(element("dt", `${i}`), element("dd", [what, shape, dtype].filter(Boolean).join("  "))));
    panel.append(inputs);
  }
  if (item.attention) showAttention(panel, item.attention); // first: what A is for
  if (item.value) showValue(panel, item.value);
  if (item.kind !== "module") showGradient(panel, item);
}

function showValue(panel, value) {
  const pooled = value.pooled ? ", averaged over blocks" : "";
  const which = value.shape.length > 2 ? `[0, ...] of ${JSON.stringify(value.shape)}` : "";
  panel.append(element("h3", `value ${which}${pooled}`.trim()));
  panel.append(matrixCanvas(value));
  if (value.stats) {
    const s = value.stats;
    panel.append(element("div", `min ${format(s.min)}  max ${format(s.max)}  mean ${format(s.mean)}  std ${format(s.std)}`, { class: "note" }));
  }
  if (value.histogram) panel.append(histogramCanvas(value.histogram));
}

function showGradient(panel, item) {
  panel.append(element("h3", "gradient dL/d(this)"));
  if (!data.hasGrads) return panel.append(element("p", data.noGradient, { class: "note", "data-field": "gradient" }));
  const complete = item.received ? item.received[1] : null;
  if (complete === null) return panel.append(element("p", "no gradient flows here", { class: "note", "data-field": "gradient" }));
  if (moment < complete) {
    return panel.append(element("p", `not yet: it is complete at moment ${complete} (now ${moment})`, { class: "note", "data-field": "gradient" }));
  }
  if (item.gradNote) panel.append(element("p", item.gradNote, { class: "note", "data-field": "gradient" }));
  if (item.grad) panel.append(matrixCanvas(item.grad));
  if (item.gradEdges && item.gradEdges.length) {
    const along = item.gradEdges.map(([text, reader]) => `${text} from ${reader}`).join(", ");
    panel.append(element("p", `arrived along ${item.gradEdges.length} edge(s), norms: ${along}`, { class: "note", "data-field": "gradient" }));
  }
}

function showAttention(panel, attention) {
  panel.append(element("h3", "attention A, one map per head (rows: queries, columns: keys)"));
  const bytes = bytesOf(attention.data);
  const maps = element("div", null, { class: "maps" });
  const size = attention.rows * attention.cols;
  for (let h = 0; h < attention.heads; h++) {
    const at = (r, c) => bytes[h * size + r * attention.cols + c] / 255;
    const figure = element("figure", null, { "data-head": h });
    figure.append(heatmap(
      attention.rows, attention.cols,
      (r, c) => `${(attention.rowLabels || [])[r] ?? r} \u2192 ${(attention.colLabels || [])[c] ?? c}: ${format(at(r, c))}`,
      (r, c) => sequential(at(r, c)),
      { rows: attention.rowLabels, cols: attention.colLabels },
    ));
    figure.append(element("figcaption", `head ${h}`));
    maps.append(figure);
  }
  panel.append(maps);
}

// -- the shortcuts, each beside its branch --------------------------------------------------

function showShortcuts(k) {
  const section = document.getElementById("shortcuts");
  if (!data.shortcuts.length) {
    section.replaceChildren(element("p", "no gradient shortcut in this graph (no x + F(x) with parameters in F)"));
    return;
  }
  if (!section.querySelector("table")) buildShortcutTable(section);
  data.shortcuts.forEach((shortcut, j) => {
    const row = section.querySelector(`tr[data-shortcut="${j}"]`);
    const flowed = ([m]) => data.hasGrads && m !== null && m <= k;
    const [, skipText, skipValue] = shortcut.skip;
    const largest = Math.max(skipValue || 0, ...shortcut.branch.map(([, , v]) => v || 0)) || 1;
    const bar = (value, kind) => `<span class="bar ${kind}" style="width:${Math.max(1, 80 * (value || 0) / largest)}px"></span>`;
    row.cells[1].innerHTML = flowed(shortcut.skip) ? `<span class="num">${skipText}</span>` : "\u00b7";
    row.cells[2].innerHTML = flowed(shortcut.skip)
      ? `${bar(skipValue, "skip")}<span class="num">${skipText}</span> <span class="unchanged">= dL/dy, unchanged</span>` : "\u00b7";
    const branch = shortcut.branch.filter(flowed);
    row.cells[3].innerHTML = branch.length
      ? branch.map(([, text, value, reader]) => `${bar(value, "branch")}<span class="num">${text}</span> into ${escapeHtml(reader)}`).join("<br>")
      : "\u00b7";
    const current = k > 0 && (shortcut.moment === k || shortcut.branch.some(([m]) => m === k));
    row.classList.toggle("current", current);
  });
}

function buildShortcutTable(section) {
  section.append(element("h2", `Gradient shortcuts: y = x + F(x) (${data.shortcuts.length})`));
  section.append(element("p", "Backward through a sum hands dL/dy to both operands. The skip edge delivers it to x unchanged (the I of I + dF/dx); the branch delivers to x only what passes back through F (dL/dy dF/dx), along each edge where F reads x."));
  const table = element("table");
  table.innerHTML = "<thead><tr><th>where</th><th>dL/dy at the sum</th><th>shortcut: to x</th><th>branch F: back to x</th></tr></thead>";
  const body = element("tbody");
  data.shortcuts.forEach((shortcut, j) => {
    const row = element("tr", null, { "data-shortcut": j });
    row.append(element("td", shortcut.name), element("td"), element("td"), element("td"));
    row.onclick = () => { select(shortcut.item); keepInView(shortcut.item); };
    body.append(row);
  });
  table.append(body);
  section.append(table);
}

function escapeHtml(text) {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

// -- start --------------------------------------------------------------------------------

document.getElementById("title").textContent = data.title;
const status = document.getElementById("status");
if (data.hasGrads) {
  status.textContent = `The backward pass ran ${last} nodes. Press \u25B6 to watch the gradient flow back from the output; click a node to see what it holds.`;
} else {
  status.textContent = data.noGradient;
  status.classList.add("warning");
}
document.getElementById("panel").append(element("p", "Click a node: its op, the equation it computes, shapes, what it saved for backward, its value and gradient. Drag to pan, the mouse wheel zooms.", { class: "hint" }));
setUpStepper();
setUpPanZoom();
startView();
show(0);
