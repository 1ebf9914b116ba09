// The runs page's upload: file picker or drag-and-drop, one or many files, XMLHttpRequest for the upload
// progress, the server's own message shown inline. Several files go one request each, one after the other:
// each gets its own outcome line (stored as #id, duplicate of #id, refused with the reason), and a file
// refused never stops the ones after it. One file stored opens its run page, as before.
import { el, errorMessage, showMessage } from "./util.js";

const form = document.getElementById("upload-form");
const zone = document.getElementById("dropzone");
const fileInput = document.getElementById("upload-file");
const chosen = document.getElementById("upload-chosen");
const progress = document.getElementById("upload-progress");
const status = document.getElementById("upload-status");
const errorBox = document.getElementById("upload-error");
const outcomes = document.getElementById("upload-outcomes");
let droppedFiles = [];

function showError(message) {
  showMessage(errorBox, message);
}

function currentFiles() {
  return droppedFiles.length ? droppedFiles : [...fileInput.files];
}

function showChosen() {
  const files = currentFiles();
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

// One file's request: resolves with {status, body} (status 0: it never reached the server).
function send(file, fields, label) {
  return new Promise((resolve) => {
    const data = new FormData();
    for (const [key, value] of fields) data.append(key, value);
    data.set("file", file, file.name);
    const request = new XMLHttpRequest();
    request.open("POST", "/api/runs");
    request.setRequestHeader("Accept", "application/json");
    request.upload.addEventListener("progress", (progressEvent) => {
      if (progressEvent.lengthComputable) {
        progress.max = progressEvent.total;
        progress.value = progressEvent.loaded;
        status.textContent = `Uploading ${label}… ${Math.round((100 * progressEvent.loaded) / progressEvent.total)} %`;
      }
    });
    request.upload.addEventListener("load", () => { status.textContent = `Uploaded ${label}; reading it…`; });
    request.addEventListener("load", () => {
      let body = null;
      try { body = JSON.parse(request.responseText); } catch { body = null; }
      resolve({ status: request.status, body });
    });
    request.addEventListener("error", () => resolve({ status: 0, body: null }));
    progress.hidden = false;
    progress.value = 0;
    request.send(data);
  });
}

function stored(answer) {
  return answer.status >= 200 && answer.status < 300 && answer.body && answer.body.id !== undefined;
}

function refusal(answer) {
  if (answer.status === 0) return "The upload did not reach the server (network error or the connection was closed).";
  return errorMessage(answer.status, answer.body);
}

function outcomeLine(file, answer) {
  if (stored(answer)) {
    return el("li", { class: "outcome-stored" }, [`${file.name}: stored as `,
      el("a", { href: `/runs/${answer.body.id}`, text: `#${answer.body.id}` })]);
  }
  if (answer.body && answer.body.existing_run_id !== undefined) {
    const existing = answer.body.existing_run_id;
    return el("li", { class: "outcome-duplicate" }, [`${file.name}: duplicate of `,
      el("a", { href: `/runs/${existing}`, text: `#${existing}` }), " (not imported again)"]);
  }
  return el("li", { class: "outcome-refused" }, `${file.name}: refused: ${refusal(answer)}`);
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const files = currentFiles();
  if (!files.length) { showError("Choose a result file first (or drop some on the box)."); return; }
  const fields = [...new FormData(form).entries()].filter(([key, value]) => key !== "file" && value !== "");
  showError("");
  outcomes.replaceChildren();
  if (files.length === 1) {
    const answer = await send(files[0], fields, files[0].name);
    if (stored(answer)) {
      status.textContent = "Imported.";
      window.location.assign(`/runs/${answer.body.id}`);
      return;
    }
    status.textContent = "";
    progress.hidden = answer.status === 0;
    showError(refusal(answer));
    if (answer.body && answer.body.existing_run_id !== undefined) {
      errorBox.append(" ", el("a", { href: `/runs/${answer.body.existing_run_id}`, id: "existing-run", text: `Open run ${answer.body.existing_run_id}` }));
    }
    return;
  }
  // A name names one run: with several files each is named by its file name.
  const shared = fields.filter(([key]) => key !== "name");
  let storedCount = 0;
  for (const [index, file] of files.entries()) {
    const answer = await send(file, shared, `${file.name} (${index + 1} of ${files.length})`);
    if (stored(answer)) storedCount += 1;
    outcomes.append(outcomeLine(file, answer));
  }
  progress.hidden = true;
  status.textContent = `${storedCount} of ${files.length} files stored.` + (storedCount ? " Reload to see them in the list." : "");
});
