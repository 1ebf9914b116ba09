// A saved plan's read-only page: draws the stored document, the same one its downloads export.
import { fetchJSON, url } from "./util.js";
import { renderKccb, renderWorkload } from "./plan_render.js";

const results = document.getElementById("plan-results");
const saved = await fetchJSON(url("get_plan", { plan_id: results.dataset.planId }));
renderKccb(document.querySelector(`#mode-${saved.mode} .kccb`), saved.workload);
renderWorkload(document.querySelector(`#workload-${saved.mode} .workload`), saved.workload);
document.body.dataset.previewed = "saved";
