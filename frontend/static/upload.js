// The runs page's upload: file picker or drag-and-drop, one or many files, all in one request (XMLHttpRequest, for
// the upload's progress: MB sent of the total and the rate), the server's own message shown inline.
// What comes back (POST /api/runs): one run (one file, or one training job's files: NCCL Inspector dumps,
// profiler traces) opens its run page; several runs list an outcome per file (stored as #id, duplicate of #id,
// refused with the reason); a refusal of the whole upload is shown in the error box, naming the file.
import { el, errorMessage, showMessage, url, utcFromLocal } from "./util.js";

const form = document.getElementById("upload-form");
const zone = document.getElementById("dropzone");
const fileInput = document.getElementById("upload-file");
const chosen = document.getElementById("upload-chosen");
const progressBox = document.getElementById("upload-progress-box");
const progress = document.getElementById("upload-progress");
const progressText = document.getElementById("upload-progress-text");
const status = document.getElementById("upload-status");
const errorBox = document.getElementById("upload-error");
const outcomes = document.getElementById("upload-outcomes");
const nameInput = document.getElementById("upload-name");
const submit = document.getElementById("upload-submit");
const maxUploadBytes = Number(form.dataset.maxUploadBytes);
let droppedFiles = [];

function showError(message) {
  showMessage(errorBox, message);
}

function currentFiles() {
  return droppedFiles.length ? droppedFiles : [...fileInput.files];
}

// Decimal units, as the CLI's progress shows them; "loaded of total" both in the total's unit.
const UNITS = [[1e9, "GB"], [1e6, "MB"], [1e3, "kB"]];

function unitFor(bytes) {
  return UNITS.find(([scale]) => bytes >= scale) || [1, "bytes"];
}

function inUnit(bytes, [scale]) {
  const digits = scale === 1 ? 0 : 1;
  return (bytes / scale).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function showChosen() {
  const files = currentFiles();
  // A name names one run: several files are named by their file names (a job's run by its first file's).
  nameInput.disabled = files.length > 1;
  nameInput.placeholder = files.length > 1 ? "several files: their file names" : "default: the file name";
  if (files.length === 1) chosen.textContent = `${files[0].name} (${files[0].size.toLocaleString("en-US")} bytes)`;
  else if (files.length > 1) {
    const bytes = files.reduce((sum, file) => sum + file.size, 0);
    chosen.textContent = `${files.length} files (${bytes.toLocaleString("en-US")} bytes): ${files.map((file) => file.name).join(", ")}`;
  } else chosen.textContent = "";
}

fileInput.addEventListener("change", () => { droppedFiles = []; showChosen(); showError(""); });
for (const type of ["dragenter", "dragover"]) {
  zone.addEventListener(type, (event) => { event.preventDefault(); zone.classList.add("dragover"); });
}
for (const type of ["dragleave", "drop"]) {
  zone.addEventListener(type, () => zone.classList.remove("dragover"));
}
zone.addEventListener("drop", (event) => {
  event.preventDefault();
  if (event.dataTransfer.files.length) {
    droppedFiles = [...event.dataTransfer.files];
    showChosen();
    showError("");
  }
});

// The bar's value and its text (also its accessible value); the live status region only says what stage it is in.
function progressLine(label, loaded, total, seconds) {
  const unit = unitFor(total);
  const percent = total ? Math.floor((100 * loaded) / total) : 100;
  const perSecond = seconds > 0 ? loaded / seconds : 0;
  const rateUnit = unitFor(perSecond);
  const rate = perSecond ? `, ${inUnit(perSecond, rateUnit)} ${rateUnit[1]}/s` : "";
  return `${label}: ${inUnit(loaded, unit)} of ${inUnit(total, unit)} ${unit[1]} (${percent} %)${rate}`;
}

function showProgress(label, loaded, total, started) {
  progress.max = total;
  progress.value = loaded;
  const line = progressLine(label, loaded, total, (performance.now() - started) / 1000);
  progressText.textContent = line;
  progress.setAttribute("aria-valuetext", line);
}

// The request: resolves with {status, body} (status 0: it never reached the server, or the connection broke).
function send(files, fields, label) {
  return new Promise((resolve) => {
    const data = new FormData();
    for (const [key, value] of fields) data.append(key, value);
    for (const file of files) data.append("file", file, file.name);
    const total = files.reduce((sum, file) => sum + file.size, 0);
    const request = new XMLHttpRequest();
    request.open("POST", url("upload_run"));
    request.setRequestHeader("Accept", "application/json");
    const started = performance.now();
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) showProgress(label, event.loaded, event.total, started);
    });
    request.upload.addEventListener("load", () => { status.textContent = `Uploaded ${label}; reading ${files.length > 1 ? "them" : "it"}…`; });
    request.addEventListener("load", () => {
      let body = null;
      try { body = JSON.parse(request.responseText); } catch { body = null; }
      resolve({ status: request.status, body });
    });
    request.addEventListener("error", () => resolve({ status: 0, body: null }));
    progressBox.hidden = false;
    showProgress(label, 0, total, started);
    status.textContent = `Uploading ${label}…`;
    request.send(data);
  });
}

function refusal(answer) {
  if (answer.status === 0) return "The upload did not reach the server (network error or the connection was closed); nothing was stored.";
  return errorMessage(answer.status, answer.body);
}

// The list as the server renders it now (same URL: its filters, sort and page), in place of the one the page
// opened with, so that the runs just stored show without a reload; runs.js binds its controls again.
async function refreshList() {
  const current = document.getElementById("runs-list");
  if (!current) return false;
  const response = await fetch(window.location.href, { headers: { Accept: "text/html" } });
  if (!response.ok) return false;
  const fresh = new DOMParser().parseFromString(await response.text(), "text/html").getElementById("runs-list");
  if (!fresh) return false;
  // The filters stay folded or open as the reader left them (a phone's are folded).
  const fold = current.querySelector("#filters-fold");
  const freshFold = fresh.querySelector("#filters-fold");
  if (fold && freshFold) freshFold.open = fold.open;
  const adopted = document.adoptNode(fresh);
  current.replaceWith(adopted);
  document.dispatchEvent(new CustomEvent("runs-list-replaced", { detail: adopted }));
  return true;
}

function outcomeLine(outcome) {
  if (outcome.outcome === "stored") {
    return el("li", { class: "outcome-stored" }, [`${outcome.file}: stored as `,
      el("a", { href: url("run_page", { run_id: outcome.run_id }), text: `#${outcome.run_id}` })]);
  }
  if (outcome.outcome === "duplicate") {
    return el("li", { class: "outcome-duplicate" }, [`${outcome.file}: duplicate of `,
      el("a", { href: url("run_page", { run_id: outcome.run_id }), text: `#${outcome.run_id}` }), " (not imported again)"]);
  }
  return el("li", { class: "outcome-refused" }, `${outcome.file}: refused: ${outcome.detail}`);
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const files = currentFiles();
  if (!files.length) { showError("Choose a result file first (or drop some on the box)."); return; }
  const total = files.reduce((sum, file) => sum + file.size, 0);
  if (total > maxUploadBytes) {
    const what = files.length > 1 ? `These ${files.length} files (${total} bytes together) are` : `${files[0].name} (${total} bytes) is`;
    showError(`${what} larger than the limit of ${maxUploadBytes} bytes (EMUPLAN_MAX_UPLOAD_BYTES) for one upload: nothing was sent.` +
      (files.length > 1 ? " Upload them a few at a time." : ""));
    return;
  }
  const fields = [...new FormData(form).entries()]
    .filter(([key, value]) => key !== "file" && value !== "")
    .map(([key, value]) => [key, key === "measured_at" ? utcFromLocal(value) : value]);
  showError("");
  outcomes.replaceChildren();
  const label = files.length === 1 ? files[0].name : `${files.length} files`;
  submit.disabled = true;  // one upload at a time
  const answer = await send(files, fields, label);
  submit.disabled = false;
  if (answer.status === 201) {
    status.textContent = "Imported.";
    window.location.assign(url("run_page", { run_id: answer.body.id }));
    return;
  }
  if (answer.status === 200 && Array.isArray(answer.body)) {
    progressBox.hidden = true;
    outcomes.append(...answer.body.map(outcomeLine));
    const storedCount = answer.body.filter((outcome) => outcome.outcome === "stored").length;
    status.textContent = `${storedCount} of ${files.length} files stored.`;
    if (storedCount && await refreshList()) status.textContent += " The list shows them.";
    return;
  }
  status.textContent = "";
  progressBox.hidden = true;
  showError(refusal(answer));
  if (answer.body && answer.body.existing_run_id !== undefined) {
    errorBox.append(" ", el("a", { href: url("run_page", { run_id: answer.body.existing_run_id }), id: "existing-run", text: `Open run ${answer.body.existing_run_id}` }));
  }
});
