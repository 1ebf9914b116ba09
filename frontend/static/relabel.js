// The run page's "Collective" form (editors only): PATCH /api/runs/{id} with {collectives: {from: to}},
// then the page again, its figures computed with the new collective; the server's message shown inline.
import { fetchJSON, showMessage } from "./util.js";

const form = document.getElementById("relabel-form");
const errorBox = document.getElementById("relabel-error");
const button = document.getElementById("relabel-submit");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const from = document.getElementById("relabel-from").value;
  const to = document.getElementById("relabel-to").value;
  showMessage(errorBox, "");
  button.disabled = true;
  try {
    await fetchJSON(`/api/runs/${form.dataset.runId}`, { method: "PATCH", json: { collectives: { [from]: to } } });
    window.location.reload();
  } catch (error) {
    showMessage(errorBox, error.message);
    button.disabled = false;
  }
});
