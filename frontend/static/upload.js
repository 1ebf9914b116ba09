// The runs page's upload: file picker or drag-and-drop, XMLHttpRequest for its upload progress,
// the server's own error message shown inline.
import { el, errorMessage, showMessage } from "./util.js";

const form = document.getElementById("upload-form");
const zone = document.getElementById("dropzone");
const fileInput = document.getElementById("upload-file");
const chosen = document.getElementById("upload-chosen");
const progress = document.getElementById("upload-progress");
const status = document.getElementById("upload-status");
const errorBox = document.getElementById("upload-error");
let droppedFile = null;

function showError(message) {
  showMessage(errorBox, message);
}

function currentFile() {
  return droppedFile || fileInput.files[0] || null;
}

function showChosen() {
  const file = currentFile();
  chosen.textContent = file ? `${file.name} (${file.size.toLocaleString("en-US")} bytes)` : "";
}

fileInput.addEventListener("change", () => { droppedFile = null; showChosen(); showError(""); });
for (const type of ["dragenter", "dragover"]) {
  zone.addEventListener(type, (event) => { event.preventDefault(); zone.classList.add("dragover"); });
}
for (const type of ["dragleave", "drop"]) {
  zone.addEventListener(type, () => zone.classList.remove("dragover"));
}
zone.addEventListener("drop", (event) => {
  event.preventDefault();
  if (event.dataTransfer.files.length) {
    droppedFile = event.dataTransfer.files[0];
    showChosen();
    showError("");
  }
});

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const file = currentFile();
  if (!file) { showError("Choose a result file first (or drop one on the box)."); return; }
  const data = new FormData(form);
  data.set("file", file, file.name);
  for (const [key, value] of [...data.entries()]) if (value === "") data.delete(key);
  const request = new XMLHttpRequest();
  request.open("POST", "/api/runs");
  request.setRequestHeader("Accept", "application/json");
  request.upload.addEventListener("progress", (progressEvent) => {
    if (progressEvent.lengthComputable) {
      progress.max = progressEvent.total;
      progress.value = progressEvent.loaded;
      status.textContent = `Uploading… ${Math.round((100 * progressEvent.loaded) / progressEvent.total)} %`;
    }
  });
  request.upload.addEventListener("load", () => { status.textContent = "Uploaded; reading the file…"; });
  request.addEventListener("load", () => {
    let body = null;
    try { body = JSON.parse(request.responseText); } catch { body = null; }
    if (request.status >= 200 && request.status < 300 && body && body.id !== undefined) {
      status.textContent = "Imported.";
      window.location.assign(`/runs/${body.id}`);
      return;
    }
    status.textContent = "";
    progress.hidden = true;
    showError(errorMessage(request.status, body));
    if (body && body.existing_run_id !== undefined) {
      errorBox.append(" ", el("a", { href: `/runs/${body.existing_run_id}`, id: "existing-run", text: `Open run ${body.existing_run_id}` }));
    }
  });
  request.addEventListener("error", () => {
    status.textContent = "";
    progress.hidden = true;
    showError("The upload did not reach the server (network error or the connection was closed).");
  });
  showError("");
  progress.hidden = false;
  progress.value = 0;
  request.send(data);
});
