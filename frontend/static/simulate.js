// "Simulate with ASTRA-sim" on a saved plan's page: start a background simulation, follow its progress, cancel
// it, and show its per-rank step beside the plan's planned communication. The server computes every figure.
import { cancelJob, followJob, isRunning } from "./jobs.js";
import { el, fetchJSON, integer, percent, plural, showMessage, table, timeIn, url } from "./util.js";

const card = document.getElementById("simulate");
const planId = Number(card.dataset.planId);
const startButton = document.getElementById("simulate-start");
const cancelButton = document.getElementById("simulate-cancel");
const timeoutInput = document.getElementById("simulate-timeout");
const gpuSelect = document.getElementById("simulate-gpu");
const utilisationInput = document.getElementById("simulate-utilisation");
const gpuLabels = JSON.parse(card.dataset.gpus);
const progress = document.getElementById("simulate-progress");
const status = document.getElementById("simulate-status");
const errorBox = document.getElementById("simulate-error");
const resultBox = document.getElementById("simulate-result");
let currentJob = null;

const us = (ns) => timeIn(ns / 1000);

function describe(job) {
  if (job.state === "starting") return "Starting …";
  if (job.state === "exporting") return "Writing the plan's Chakra traces …";
  if (job.state === "simulating") return `ASTRA-sim: ${job.ranks_done} of ${plural(job.ranks_total, "rank")} finished`;
  if (job.state === "cancelled") return "Cancelled: no result.";
  if (job.state === "failed") return "Failed: no result.";
  return `Simulated ${job.finished_at.slice(0, 16).replace("T", " ")} UTC in ${job.result.wall_s.toFixed(2)} s.`;
}

function rankTable(result) {
  return table(
    [{ text: "ranks" }, { text: "count", num: true }, { text: "step (µs)", num: true },
      { text: "compute (µs)", num: true }, { text: "exposed comm (µs)", num: true },
      { text: "exposed (% of step)", num: true }],
    result.rank_groups.map((group) => [
      el("span", { title: group.ranks, text: group.ranks_shown }), integer(group.count), us(group.step_ns),
      us(group.compute_ns), us(group.exposed_comm_ns), percent((group.exposed_comm_ns / group.step_ns) * 100),
    ]),
  );
}

function plannedTable(result) {
  const total = result.planned_comm.reduce((sum, item) => sum + item.time_us, 0);
  const count = result.planned_comm.reduce((sum, item) => sum + item.collectives_per_step, 0);
  const rows = result.planned_comm.map((item) => [item.parallel_dim, integer(item.collectives_per_step), timeIn(item.time_us)]);
  const all = ["all", integer(count), timeIn(total)];
  all.className = "baseline";
  return table(
    [{ text: "dimension" }, { text: "collectives per step", num: true }, { text: "ideal time (µs)", num: true }],
    [...rows, all],
  );
}

function showResult(result) {
  const network = result.network.dimensions;
  const link = network[0];
  const slowest = result.rank_groups[0];
  const parts = [
    el("p", { class: "sub", id: "simulate-network", text: `Network: ${network.map((d) => d.npus).join(" × ")} NPUs as rings, links ${link.bandwidth_gb_s} GB/s and ${integer(link.latency_ns)} ns.` }),
    el("p", { id: "simulate-summary", text: `Simulated step ${us(result.step_ns)} µs (ranks ${slowest.ranks_shown}): compute ${us(slowest.compute_ns)} µs at ${+(result.utilisation * 100).toFixed(1)}% of ${gpuLabels[result.gpu] ?? result.gpu}'s bf16 peak, exposed communication ${us(slowest.exposed_comm_ns)} µs.` }),
    el("div", { class: "simulate-tables" }, [
      el("div", { id: "simulate-ranks" }, [el("h3", { text: "Simulated step per rank" }), rankTable(result)]),
      el("div", { id: "simulate-planned" }, [
        el("h3", { text: "Planned communication per step" }),
        plannedTable(result),
        el("p", { class: "sub", text: "The plan's α-β ideal times, one collective after another: what the step would wait with no overlap." }),
      ]),
    ]),
  ];
  if (result.exit_note) parts.push(el("p", { class: "note", id: "simulate-exit-note", text: result.exit_note }));
  resultBox.replaceChildren(...parts);
  resultBox.hidden = false;
}

function render(job) {
  const active = isRunning(job);
  if (startButton) startButton.disabled = active;
  if (cancelButton) cancelButton.hidden = !active;
  progress.hidden = !active;
  progress.max = job.ranks_total || 1;
  progress.value = job.ranks_done;
  status.replaceChildren(describe(job));
  showMessage(errorBox, job.state === "failed" ? job.error : "");
  if (job.result) showResult(job.result);
}

async function follow(job) {
  try {
    await followJob(job, url("get_simulation", { job_id: job.id }), (latest) => {
      currentJob = latest;
      render(latest);
    });
  } catch (error) {
    showMessage(errorBox, error.message);
    if (startButton) startButton.disabled = false;
  }
}

startButton?.addEventListener("click", async () => {
  showMessage(errorBox, "");
  startButton.disabled = true;
  try {
    const limit = timeoutInput.value.trim();
    const utilisation = utilisationInput.value.trim();
    const options = { gpu: gpuSelect.value };
    if (utilisation) options.utilisation = Number(utilisation) / 100;
    if (limit) options.timeout_s = Number(limit);
    follow(await fetchJSON(url("start_simulation", { plan_id: planId }), { json: options }));
  } catch (error) {
    showMessage(errorBox, error.message);
    startButton.disabled = false;
  }
});

cancelButton?.addEventListener("click", async () => {
  if (!currentJob) return;
  cancelButton.disabled = true;
  try {
    render(await cancelJob(url("cancel_simulation", { job_id: currentJob.id })));
  } catch (error) {
    showMessage(errorBox, error.message);
  } finally {
    cancelButton.disabled = false;
  }
});

// The plan's newest simulation: followed while it runs (another tab, a reload), its result shown once done.
fetchJSON(url("list_simulations", {}, { plan_id: planId })).then((jobs) => {
  const newest = jobs.find((job) => isRunning(job) || job.state === "succeeded");
  if (newest && gpuSelect) {
    // The form starts where the shown simulation was run, so that it says what the result assumed.
    gpuSelect.value = newest.request.gpu;
    utilisationInput.value = String(+(newest.request.utilisation * 100).toFixed(1));
    timeoutInput.value = String(newest.request.timeout_s);
  }
  if (newest) follow(newest);
}).catch(() => {});
