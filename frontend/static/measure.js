// "Measure locally" on a saved plan's page: start a background measurement, follow its progress,
// cancel it, and link the stored run. Everything is computed by the server's measurement API.
import { cancelJob, followJob, isRunning } from "./jobs.js";
import { el, fetchJSON, showMessage, url } from "./util.js";

const card = document.getElementById("measure");
const planId = Number(card.dataset.planId);
const form = document.getElementById("measure-form");
const startButton = document.getElementById("measure-start");
const cancelButton = document.getElementById("measure-cancel");
const progress = document.getElementById("measure-progress");
const status = document.getElementById("measure-status");
const errorBox = document.getElementById("measure-error");
let currentJob = null;

function showError(message) {
  showMessage(errorBox, message);
}

function describe(job) {
  if (job.state === "starting") return `Starting ${job.world_size} processes …`;
  if (job.state === "running") {
    const phase = job.warmup ? " (warm-up)" : "";
    return `${job.iterations_done} of ${job.iterations_total} iterations done${phase}`;
  }
  if (job.state === "storing") return "Storing the run …";
  if (job.state === "cancelled") return "Cancelled: no run stored.";
  if (job.state === "failed") return "Failed: no run stored.";
  return "";
}

function render(job) {
  const active = isRunning(job);
  startButton.disabled = active;
  cancelButton.hidden = !active;
  progress.hidden = !active;
  progress.max = job.iterations_total || 1;
  progress.value = job.iterations_done;
  status.replaceChildren(describe(job));
  if (job.state === "succeeded") {
    status.replaceChildren("Done: ", el("a", { href: url("run_page", { run_id: job.run_id }), id: "measure-run-link", text: `measured run #${job.run_id}` }));
  }
  showError(job.state === "failed" ? job.error : "");
}

async function follow(job) {
  try {
    await followJob(job, url("get_measurement", { job_id: job.id }), (latest) => {
      currentJob = latest;
      render(latest);
    });
  } catch (error) {
    showError(error.message);
    startButton.disabled = false;
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  showError("");
  const body = {
    world_size: Number(document.getElementById("measure-world-size").value),
    scheduling: document.getElementById("measure-realtime").checked ? "realtime" : "normal",
  };
  const iterations = document.getElementById("measure-iterations").value.trim();
  if (iterations !== "") body.iterations = Number(iterations);
  startButton.disabled = true;
  try {
    follow(await fetchJSON(url("start_measurement", { plan_id: planId }), { json: body }));
  } catch (error) {
    showError(error.message);
    startButton.disabled = false;
  }
});

cancelButton.addEventListener("click", async () => {
  if (!currentJob) return;
  cancelButton.disabled = true;
  try {
    render(await cancelJob(url("cancel_measurement", { job_id: currentJob.id })));
  } catch (error) {
    showError(error.message);
  } finally {
    cancelButton.disabled = false;
  }
});

// A measurement of this plan started earlier (another tab, a reload) is picked up where it is.
fetchJSON(url("list_measurements")).then((jobs) => {
  const running = jobs.find((job) => job.plan_id === planId && isRunning(job));
  if (running) follow(running);
}).catch(() => {});
