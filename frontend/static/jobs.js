// Background jobs (measurements, simulations, relabellings: services/jobs/): any job's JSON, whichever URL
// answers it, has `finished_at` null while it runs. The one poller every page follows its jobs with.
import { fetchJSON } from "./util.js";

const POLL_MS = 500;

export const isRunning = (job) => !job.finished_at;

// Shows `job`, then what `url` answers every POLL_MS, until the job has ended; resolves with the ended job.
export async function followJob(job, url, show) {
  show(job);
  while (isRunning(job)) {
    await new Promise((resolve) => { setTimeout(resolve, POLL_MS); });
    job = await fetchJSON(url);
    show(job);
  }
  return job;
}

// Asks the server to cancel the job at `url`; answers with the job once it has ended.
export const cancelJob = (url) => fetchJSON(url, { method: "DELETE" });
