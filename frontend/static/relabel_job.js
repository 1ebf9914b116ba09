// A huge run relabelled or linked to a plan is summarised again by a job (PATCH answered 202 with it,
// api/relabel_jobs.py): its stage and the share of the stored tables read, polled until it ends, shown after
// `anchor` with a Cancel button. Resolves once it succeeded; throws its outcome otherwise (the run unchanged).
import { fetchJSON } from "./util.js";

const POLL_MS = 500;
const STAGES = {
  starting: "Starting",
  copying: "Reading the stored tables",
  summarising: "Computing the statistics",
  saving: "Saving",
};

function described(job) {
  const stage = STAGES[job.state] || job.state;
  if (job.state !== "copying" || !job.bytes_total) return `${stage}…`;
  const percent = Math.floor((100 * job.bytes_done) / job.bytes_total);
  return `${stage}: ${percent} % of ${(job.bytes_total / 2 ** 20).toFixed(1)} MiB…`;
}

// The answer of a PATCH that may have started a job: a job has a cancel URL, a run does not.
export const isRelabelJob = (answer) => Boolean(answer && answer.cancel_url);

export async function followRelabelJob(job, anchor) {
  const box = document.createElement("div");
  box.className = "relabel-job";
  const status = document.createElement("p");
  status.setAttribute("role", "status");
  const bar = document.createElement("progress");
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.textContent = "Cancel";
  box.append(status, bar, cancel);
  anchor.after(box);
  cancel.addEventListener("click", () => {
    cancel.disabled = true;
    fetchJSON(job.cancel_url, { method: "DELETE" }).catch((error) => { status.textContent = error.message; });
  });
  try {
    while (!job.finished_at) {
      status.textContent = described(job);
      if (job.state === "copying" && job.bytes_total) bar.value = job.bytes_done / job.bytes_total;
      else bar.removeAttribute("value");
      await new Promise((resolve) => { setTimeout(resolve, POLL_MS); });
      job = await fetchJSON(job.url);
    }
  } finally {
    box.remove();
  }
  if (job.state !== "succeeded") {
    throw new Error(job.state === "cancelled" ? "Cancelled: the run is unchanged." : job.error);
  }
}
