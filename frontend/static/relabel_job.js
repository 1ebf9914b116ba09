// A huge run relabelled or linked to a plan is summarised again by a job (PATCH answered 202 with it,
// services/jobs/relabel.py): its stage and the share of the stored tables read, polled until it ends, shown after
// `anchor` with a Cancel button. Resolves once it succeeded; throws its outcome otherwise (the run unchanged).
import { cancelJob, followJob } from "./jobs.js";

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
    cancelJob(job.cancel_url).catch((error) => { status.textContent = error.message; });
  });
  try {
    job = await followJob(job, job.url, (latest) => {
      status.textContent = described(latest);
      if (latest.state === "copying" && latest.bytes_total) bar.value = latest.bytes_done / latest.bytes_total;
      else bar.removeAttribute("value");
    });
  } finally {
    box.remove();
  }
  if (job.state !== "succeeded") {
    throw new Error(job.state === "cancelled" ? "Cancelled: the run is unchanged." : job.error);
  }
}
