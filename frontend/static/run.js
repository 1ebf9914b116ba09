// The run page: draws the run's CDF, delay and bandwidth charts from the figure endpoints.
import { drawAll, wireLogToggles } from "./charts.js";

wireLogToggles();
drawAll().then(() => { document.body.dataset.chartsDrawn = "true"; });
