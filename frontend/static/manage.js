// A run's, plan's or comparison's manage section (templates/_manage.html): the edit form sends the API's PATCH
// and reloads; "Delete…" first asks the API what else deleting changes (GET …/deletion) and says it, and only
// the confirmation's button sends the DELETE.
import { followRelabelJob, isRelabelJob } from "./relabel_job.js";
import { fetchJSON, plural, showMessage, utcFromLocal } from "./util.js";

const section = document.getElementById("manage");
const { api, what, id, afterDelete } = section.dataset;

// "key = value" lines as the API's facts object; a line without "=" is named.
function factsOf(text) {
  const facts = {};
  text.split("\n").forEach((line, index) => {
    if (!line.trim()) return;
    const at = line.indexOf("=");
    if (at < 0) throw new Error(`Fabric facts: line ${index + 1} (“${line.trim()}”) is not “key = value”.`);
    facts[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  });
  return facts;
}

const form = document.getElementById("manage-form");
if (form) {
  const errorBox = document.getElementById("manage-error");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    try {
      const changes = {
        name: data.get("name"),
        tags: data.get("tags").split(",").map((tag) => tag.trim()).filter(Boolean),
        note: data.get("note"),
      };
      if (what === "run") {
        changes.facts = factsOf(data.get("facts"));
        changes.plan_id = data.get("plan_id") ? Number(data.get("plan_id")) : null;
        if (data.get("measured_at")) changes.measured_at = utcFromLocal(data.get("measured_at"));
      }
      const answer = await fetchJSON(api, { method: "PATCH", json: changes });
      if (isRelabelJob(answer)) await followRelabelJob(answer, form); // a huge run linked: its statistics' job
      window.location.reload();
    } catch (error) {
      showMessage(errorBox, error.message);
    }
  });
}

// What else deleting changes, in words, from GET …/deletion.
function consequences(account) {
  if (what === "run") {
    const listed = account.comparisons.map((c) => `#${c.id} “${c.name}”`).join(", ");
    return (account.comparisons.length
      ? `Run #${id} is in ${plural(account.comparisons.length, "saved comparison")} (${listed}): they will show their other runs. `
      : `Run #${id} is in no saved comparison. `) + "Its samples, statistics, tags and facts are deleted with it; this cannot be undone.";
  }
  if (what === "plan") {
    const runs = account.unlinked_run_ids;
    const reading = account.comparisons.map((c) => `#${c.id} “${c.name}”`).join(", ");
    return (runs.length
      ? `${plural(runs.length, "run is", "runs are")} linked to plan #${id} (${runs.map((run) => `#${run}`).join(", ")}): they will be unlinked and their statistics computed again without its network. `
      : `No run is linked to plan #${id}. `)
      + (account.comparisons.length
        ? `${plural(account.comparisons.length, "saved comparison reads", "saved comparisons read")} a run with it (${reading}): they will read that run with its own plan. `
        : "")
      + "This cannot be undone.";
  }
  return (account.share_links
    ? `Comparison #${id} has ${plural(account.share_links, "share link")} (${account.active_share_links} active): they are deleted with it and stop opening it. `
    : `Comparison #${id} has no share link. `) + "Its runs stay. This cannot be undone.";
}

const openButton = document.getElementById("delete-open");
if (openButton) {
  const confirmBox = document.getElementById("delete-confirm");
  const errorBox = document.getElementById("delete-error");
  openButton.addEventListener("click", async () => {
    try {
      document.getElementById("delete-consequences").textContent = consequences(await fetchJSON(`${api}/deletion`));
      confirmBox.hidden = false;
      openButton.hidden = true;
      document.getElementById("delete-no").focus();
    } catch (error) {
      showMessage(errorBox, error.message);
    }
  });
  document.getElementById("delete-no").addEventListener("click", () => {
    confirmBox.hidden = true;
    openButton.hidden = false;
  });
  document.getElementById("delete-yes").addEventListener("click", async () => {
    try {
      await fetchJSON(api, { method: "DELETE" });
      window.location.assign(afterDelete);
    } catch (error) {
      showMessage(errorBox, error.message);
    }
  });
}
