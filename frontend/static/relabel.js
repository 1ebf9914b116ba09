// The run page's edit forms (editors only): "Collective" PATCHes /api/runs/{id} with {collectives: {from:
// to}}, "Platform" with {platform}; then the page again, its figures and verdict computed anew; the
// server's message shown inline. A huge run's relabelling is a job: its progress shown until it ends.
import { followRelabelJob, isRelabelJob } from "./relabel_job.js";
import { fetchJSON, showMessage, url } from "./util.js";

async function patchRun(runId, changes, button, errorBox) {
  showMessage(errorBox, "");
  button.disabled = true;
  try {
    const answer = await fetchJSON(url("change_run", { run_id: runId }), { method: "PATCH", json: changes });
    if (isRelabelJob(answer)) await followRelabelJob(answer, button.form);
    window.location.reload();
  } catch (error) {
    showMessage(errorBox, error.message);
    button.disabled = false;
  }
}

const platformForm = document.getElementById("platform-form");
platformForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const platform = document.getElementById("platform-choice").value || null;
  patchRun(platformForm.dataset.runId, { platform }, document.getElementById("platform-submit"), document.getElementById("platform-error"));
});

const form = document.getElementById("relabel-form");
const errorBox = document.getElementById("relabel-error");
const button = document.getElementById("relabel-submit");

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const from = document.getElementById("relabel-from").value;
  const to = document.getElementById("relabel-to").value;
  patchRun(form.dataset.runId, { collectives: { [from]: to } }, button, errorBox);
});
