// A saved plan's read-only page: draws the stored document, the same one its downloads export.
import { fetchJSON } from "./util.js";
import { renderKccb, renderWorkload } from "./plan_render.js";

const results = document.getElementById("plan-results");
const saved = await fetchJSON(`/api/plans/${results.dataset.planId}`);
renderKccb(document.querySelector(`#mode-${saved.mode} .kccb`), saved.workload);
renderWorkload(document.querySelector(`#workload-${saved.mode} .workload`), saved.workload);
document.body.dataset.previewed = "saved";
