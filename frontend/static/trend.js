// The trend page's charts: one per figure of the series, built by the server (GET /api/trend/figures).
import { drawFigure, plotlyReady } from "./charts.js";
import { el, fetchJSON } from "./util.js";

const box = document.getElementById("trend-charts");
if (box) {
  try {
    const figures = await fetchJSON(box.dataset.figuresUrl);
    await plotlyReady();
    for (const { figure, plot } of figures) {
      const chart = el("div", { class: "chart", id: `trend-${figure}`, "data-filename": `trend-${figure}` });
      box.append(chart);
      await drawFigure(chart, plot);
    }
    box.dataset.drawn = "true";
  } catch (error) {
    box.replaceChildren(el("p", { class: "error", text: `Charts unavailable: ${error.message}` }));
    box.dataset.drawn = "error";
  }
}
