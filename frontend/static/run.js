// The run page: draws the run's charts from the figure endpoints; the delay chart's "log y" and
// "clip at p99.9" boxes fetch it again with those options (the server builds every figure).
import { drawAll, drawFromUrl, wireLogToggles } from "./charts.js";

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

drawAll().then(() => { document.body.dataset.chartsDrawn = "true"; });
