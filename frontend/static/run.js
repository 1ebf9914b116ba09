// The run page: draws the run's charts from the figure endpoints; the delay chart's "log y" and
// "clip at p99.9" boxes fetch it again with those options (the server builds every figure).
import { drawAll, drawFromUrl, wireLogToggles } from "./charts.js";
import { renderStepCostHeadline, stepCostDetails } from "./step_cost.js";
import { fetchJSON } from "./util.js";

wireLogToggles();

const delay = document.getElementById("delay-chart");
const options = [...document.querySelectorAll("input[data-delay-option]")];
const delayBase = delay ? delay.dataset.figureUrl : null;

function delayUrl() {
  const query = new URLSearchParams();
  for (const box of options) if (box.checked) query.set(box.dataset.delayOption, "true");
  const text = query.toString();
  return text ? `${delayBase}?${text}` : delayBase;
}

for (const box of options) {
  box.addEventListener("change", async () => {
    delay.dataset.figureUrl = delayUrl();
    delay.dataset.drawn = "false";
    await drawFromUrl(delay);
  });
}

// What a training step of the plan costs on this run, from the page's JSON twin (the server computes it).
async function showStepCost() {
  const headline = document.getElementById("step-cost-headline");
  if (!headline) return;
  const section = document.getElementById("step-cost");
  try {
    const { step_cost: cost } = await fetchJSON(section.dataset.statsUrl);
    renderStepCostHeadline(headline, cost);
    document.getElementById("step-cost-details").replaceChildren(stepCostDetails(cost, "The plan's collectives"));
  } catch (error) {
    headline.textContent = error.message;
  }
}

showStepCost();
drawAll().then(() => { document.body.dataset.chartsDrawn = "true"; });
