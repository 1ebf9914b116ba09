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

export function fitPanelTitles(container, figure) {
  const { layout } = figure;
  const plotWidth = container.clientWidth - layout.margin.l - layout.margin.r;
  const domains = xAxisKeys(layout).map((key) => layout[key].domain);
  for (const annotation of layout.annotations || []) {
    if (!annotation.hovertext) continue;
    const domain = domains.find(([start, end]) => Math.abs((start + end) / 2 - annotation.x) < 1e-9);
    if (domain) annotation.text = shortenedMarkup(annotation.hovertext, Math.floor(((domain[1] - domain[0]) * plotWidth) / TITLE_CHAR_PX));
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
  // Plotly's responsive resize takes the height from the container: pin it to the figure's.
  container.style.height = `${layout.height}px`;
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
