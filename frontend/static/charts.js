// Draws the Plotly figures the server built (charts/ builds them; nothing is computed here).
// Every element with data-figure-url gets its figure fetched and drawn as SVG traces; the modebar
// downloads PNG (Plotly's camera button) and SVG (our button).
import { el, fetchJSON } from "./util.js";

const svgDownload = {
  name: "Download plot as SVG",
  icon: { width: 24, height: 24, path: "M5 20h14v-2H5v2zM12 2l-5.5 5.5 1.41 1.41L11 5.83V16h2V5.83l3.09 3.08 1.41-1.41z" },
  click: (graph) => window.Plotly.downloadImage(graph, { format: "svg", filename: graph.dataset.filename || "chart" }),
};

function config(filename) {
  return {
    responsive: true,
    displaylogo: false,
    toImageButtonOptions: { format: "png", filename, scale: 2 },
    modeBarButtonsToAdd: [svgDownload],
  };
}

// Plotly is a classic script that blocks the parser; a page module loaded async (before it in the page) can
// fetch and render everything else while Plotly downloads and compiles, then wait here: Plotly has run once
// the document is parsed.
export function plotlyReady() {
  if (window.Plotly || document.readyState !== "loading") return Promise.resolve();
  return new Promise((resolve) => document.addEventListener("DOMContentLoaded", resolve, { once: true }));
}

// Every x axis of a layout ("xaxis", "xaxis2", …): a figure of panels has one per panel.
export function xAxisKeys(layout) {
  return Object.keys(layout).filter((key) => /^xaxis\d*$/.test(key));
}

// Panel titles come cut for a phone's three narrow panels (charts/figures.py), the whole title in their
// hover. Cut here to the width each panel has in this page: whole in a desktop's wide panels, and short
// enough in a phone's that neighbouring titles keep apart.
const TITLE_CHAR_PX = 6.6; // an average character of the titles' 11 px sans-serif

// ``markup`` (escaped text: "&lt;" is one character) cut to ``limit`` characters with an ellipsis.
function shortenedMarkup(markup, limit) {
  const characters = markup.match(/&#?\w+;|[\s\S]/gu) || [];
  return characters.length <= limit ? markup : `${characters.slice(0, limit - 1).join("").trimEnd()}…`;
}

// The width in px of the plot area ``layout`` gets in ``container`` (0 or less while the container is hidden).
function plotWidthOf(container, layout) {
  return container.clientWidth - layout.margin.l - layout.margin.r;
}

export function fitPanelTitles(container, figure) {
  const { layout } = figure;
  const plotWidth = plotWidthOf(container, layout);
  const domains = xAxisKeys(layout).map((key) => layout[key].domain);
  for (const annotation of layout.annotations || []) {
    if (!annotation.hovertext) continue;
    const domain = domains.find(([start, end]) => Math.abs((start + end) / 2 - annotation.x) < 1e-9);
    if (domain) annotation.text = shortenedMarkup(annotation.hovertext, Math.floor(((domain[1] - domain[0]) * plotWidth) / TITLE_CHAR_PX));
  }
}

// The legend's band below the x axis title (charts/figures.py, _legend_below) has a row per entry, as a
// phone needs; a wider chart fits several entries in a row and left the rest of the band blank. Before
// drawing, the band shrinks to the rows Plotly will lay out at this width, worked out the way its
// horizontal legend does (plotly.js components/legend/draw.js): an entry is its text and 40 px (symbol and
// gaps); ungrouped entries wrap at the plot area's width, each as wide as the widest once they take more
// than a row; grouped ones stack per group, and the groups wrap side by side.
// What Plotly does itself (plotly.js 4.1, legend draw.js): a legend with yref "container" reserves the margin
// from where it is anchored to the figure's edge. Anchored at the bottom (y 0), that is its own height at this
// width, rows counted by Plotly; but the figure's height stays what the layout says, so the rows come out of
// the plot area (a phone's eight rows took 150 of its 420 px), and the widened margin draws the figure a
// second time. Plotly never grows a figure to its legend: only this (and the pinned height below) does, in one
// draw. Titles need nothing of ours: they name the chart, not a run, in lines a phone's chart holds
// (figures.py, TITLE_LINE_CHARS).
const LEGEND_ITEM_GAP_PX = 5;
const LEGEND_SYMBOL_PX = 30 + 2 * LEGEND_ITEM_GAP_PX;
const LEGEND_PAD_PX = 2 * LEGEND_ITEM_GAP_PX;

// Legend entries and tick labels are in Plotly's default font (the figures set none); the names come escaped
// (the server's html.escape), the widths are of the text Plotly shows. Each distinct text is measured once a
// page.
const PLOTLY_FONT_PX = 12;
const PLOTLY_FONT_FAMILY = '"Open Sans", verdana, arial, sans-serif';
const LEGEND_ROW_PX = Math.max(PLOTLY_FONT_PX * 1.3, 16) + 3; // Plotly's entry height: one line, 19 px
// Text measured here may differ from Plotly's by a pixel: rounded up, so a row is never undercounted.
const TEXT_SLACK_PX = 2;
const ESCAPED = { "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&#x27;": "'" };
const measuredPx = new Map();
let measuringContext;

function textPx(markup) {
  if (!measuredPx.has(markup)) {
    measuringContext ??= document.createElement("canvas").getContext("2d");
    measuringContext.font = `${PLOTLY_FONT_PX}px ${PLOTLY_FONT_FAMILY}`;
    const text = markup.replace(/&(?:amp|lt|gt|quot|#x27);/g, (entity) => ESCAPED[entity]);
    measuredPx.set(markup, Math.ceil(measuringContext.measureText(text).width) + TEXT_SLACK_PX);
  }
  return measuredPx.get(markup);
}

// The height in px Plotly's horizontal legend takes for ``traces`` in a plot area ``maxWidth`` wide.
function legendHeightPx(traces, maxWidth) {
  const entries = traces.filter((trace) => trace.showlegend !== false);
  const width = (trace) => LEGEND_SYMBOL_PX + textPx(trace.name || "");
  if (entries.some((trace) => trace.legendgroup)) {
    const groups = new Map();
    for (const trace of entries) {
      const key = trace.legendgroup || Symbol("ungrouped");
      groups.set(key, [...(groups.get(key) || []), trace]);
    }
    let rowsHeight = 0, rowHeight = 0, offset = 0;
    for (const members of groups.values()) {
      const groupWidth = Math.max(...members.map(width)) + LEGEND_ITEM_GAP_PX;
      if (offset > 0 && groupWidth + offset > maxWidth) {
        rowsHeight += rowHeight;
        rowHeight = offset = 0;
      }
      rowHeight = Math.max(rowHeight, members.length * LEGEND_ROW_PX);
      offset += groupWidth;
    }
    return rowsHeight + rowHeight + LEGEND_PAD_PX;
  }
  const widths = entries.map(width);
  const total = widths.reduce((sum, w) => sum + w, 0) + (widths.length - 1) * LEGEND_ITEM_GAP_PX;
  if (total < maxWidth) return LEGEND_ROW_PX + LEGEND_PAD_PX;
  const column = Math.max(...widths) + LEGEND_ITEM_GAP_PX;
  let rows = 1, offset = 0;
  for (let index = 0; index < widths.length; index += 1) {
    if (column + offset - LEGEND_ITEM_GAP_PX >= maxWidth) {
      rows += 1;
      offset = 0;
    }
    offset += column;
  }
  return rows * LEGEND_ROW_PX + LEGEND_PAD_PX;
}

// ``layout`` (drawFigure's copy) with the band cut to what the legend needs in ``container``'s width; a
// hidden container (no width) keeps the band it came with.
function fitLegendBand(container, data, layout) {
  const legend = layout.legend;
  if (!legend || legend.yref !== "container" || legend.yanchor !== "top" || !legend.maxheight) return;
  const needed = Math.min(legendHeightPx(data, plotWidthOf(container, layout)), legend.maxheight);
  const spare = legend.maxheight - needed;
  if (spare <= 0) return;
  layout.height -= spare;
  layout.margin = { ...layout.margin, b: layout.margin.b - spare };
  layout.legend = { ...legend, y: needed / layout.height, maxheight: needed };
}

// An x axis labelled at given ticks (the sweep chart's powers of two in B/KiB/MiB) keeps every k-th label
// when the plot is too narrow for all of them side by side: Plotly would tilt them, and the tilted labels
// widen the margins, which draws the figure a second time (and still crowds a phone's axis). Plotly's own
// ticklabelstep does this for automatic ticks only ("no effect when tickmode is array"), and its automatic
// ticks on a log axis cannot say KiB or MiB. The ticks are evenly spaced (a log axis, powers of two a fixed
// step apart) across most of the axis.
const TICK_GAP_PX = 12;
const TICK_SPAN_SHARE = 0.9; // of the plot's width between the first and last tick, the axis' padding aside

function fitTickLabels(container, layout) {
  const plotWidth = plotWidthOf(container, layout);
  for (const key of xAxisKeys(layout)) {
    const axis = layout[key];
    if (!axis.ticktext || axis.ticktext.length < 3 || plotWidth <= 0) continue;
    const [start, end] = axis.domain || [0, 1];
    const spacing = ((end - start) * plotWidth * TICK_SPAN_SHARE) / (axis.ticktext.length - 1);
    const widest = Math.max(...axis.ticktext.map((text) => textPx(text))) + TICK_GAP_PX;
    const every = Math.ceil(widest / spacing);
    if (every <= 1) continue;
    layout[key] = {
      ...axis,
      tickvals: axis.tickvals.filter((_, index) => index % every === 0),
      ticktext: axis.ticktext.filter((_, index) => index % every === 0),
    };
  }
}

export async function drawFigure(container, figure) {
  const filename = container.dataset.filename || "chart";
  // Scattergl needs a WebGL context per chart and browsers cap them: pages with many charts use SVG.
  const data = figure.data.map((trace) => (trace.type === "scattergl" ? { ...trace, type: "scatter" } : trace));
  const layout = { ...figure.layout, autosize: true };
  delete layout.width;
  // One height per kind of slot, so small multiples line up; multi-panel figures bring their own.
  if (layout.height === undefined) layout.height = container.classList.contains("small") ? 340 : 420;
  // Small multiples: a smaller title, so that it fits the narrower plot.
  if (container.classList.contains("small") && layout.title) {
    layout.title = { ...layout.title, font: { ...(layout.title.font || {}), size: 12 } };
  }
  fitLegendBand(container, data, layout);
  fitTickLabels(container, layout);
  // Plotly's responsive resize takes the height from the container: pin it to the figure's (the slot's
  // min-height only holds the page still while the figure loads).
  container.style.height = `${layout.height}px`;
  container.style.minHeight = "0";
  // Drawn on the log axis the reader chose (every panel's): switching it after drawing would draw twice.
  if (container.dataset.logX === "true") {
    for (const key of xAxisKeys(layout)) layout[key] = { ...layout[key], type: "log" };
  }
  await window.Plotly.newPlot(container, data, layout, config(filename));
  container.dataset.drawn = "true";
}

export async function drawFromUrl(container) {
  try {
    const figure = await fetchJSON(container.dataset.figureUrl);
    await drawFigure(container, figure);
  } catch (error) {
    container.replaceChildren(el("p", { class: "error", text: `Chart unavailable: ${error.message}` }));
    container.dataset.drawn = "error";
  }
}

export function drawAll(root = document) {
  return Promise.all([...root.querySelectorAll("[data-figure-url]")].map(drawFromUrl));
}

// A "log x" checkbox next to a CDF: data-log-toggle names the chart element's id.
export function wireLogToggles(root = document) {
  for (const box of root.querySelectorAll("input[data-log-toggle]")) {
    box.addEventListener("change", () => {
      for (const id of box.dataset.logToggle.split(" ")) {
        const chart = document.getElementById(id);
        if (chart && chart.dataset.drawn === "true") window.Plotly.relayout(chart, { "xaxis.type": box.checked ? "log" : "linear" });
        if (chart) chart.dataset.logX = String(box.checked);
      }
      box.dispatchEvent(new CustomEvent("logchange", { bubbles: true }));
    });
  }
}
