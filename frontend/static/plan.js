// The plan page: every input change previews the plan in both modes through the planner's API and
// redraws the KCCB settings and the workload table; nothing is computed here.
import { copyButton, debounce, el, fetchJSON, fixed, integer, showMessage, table } from "/static/util.js";

const form = document.getElementById("plan-form");
const inputsCard = document.getElementById("plan-inputs");
const errorBox = document.getElementById("plan-error");
const NUMBER_FIELDS = ["dataset_size", "batch_size", "epochs", "gpus", "hosts", "tp", "pp", "micro_batches"];
const MODES = ["tutorial", "framework"];
let lastDocuments = {};
let previewSerial = 0;

function request(mode) {
  const body = { model: form.model.value, strategy: form.strategy.value, mode };
  for (const name of NUMBER_FIELDS) {
    const value = form[name].value.trim();
    if (value !== "") body[name] = Number(value);
  }
  if (form.dp_impl.value) body.dp_impl = form.dp_impl.value;
  if (form.sequence_parallel.checked) body.sequence_parallel = true;
  return body;
}

function clearDefaults() {
  for (const name of NUMBER_FIELDS) form[name].placeholder = "";
}

function sizesText(sizes) {
  return `[${sizes.join(", ")}]`;
}

function renderKccb(container, documentForMode) {
  const trials = documentForMode.kccb_trials ?? documentForMode.trials;
  const kccbList = [].concat(documentForMode.kccb);
  const blocks = [
    el("div", { class: "copy-row" }, [
      el("span", { text: "Trials (KCCB iterations):" }),
      el("code", { class: "trial-count", text: String(documentForMode.trials) }),
      copyButton(String(documentForMode.trials), "Copy trials"),
    ]),
  ];
  for (const trial of kccbList) {
    blocks.push(el("h3", { text: `${trial.algorithm} (${trial.algorithm_id})` }));
    blocks.push(el("div", { class: "copy-row" }, [
      el("span", { text: "Data sizes, bytes:" }),
      el("code", { class: "data-sizes", text: sizesText(trial.data_sizes) }),
      copyButton(trial.data_sizes.join(", "), "Copy sizes"),
    ]));
    blocks.push(el("dl", { class: "kv" }, [
      el("dt", { text: "iterations" }), el("dd", { text: integer(trial.iterations) }),
      el("dt", { text: "hosts × GPUs per host" }), el("dd", { text: `${trial.hosts} × ${trial.gpus_per_host}` }),
      el("dt", { text: "group" }), el("dd", { text: `${trial.parallel_dim} · ${trial.group_size} ranks` }),
    ]));
    if (trial.note) blocks.push(el("p", { class: "sub", text: trial.note }));
  }
  if (kccbList.length > 1) blocks.unshift(el("p", { class: "sub", text: `${trials} trial configurations in total.` }));
  container.replaceChildren(...blocks);
}

function collectivesTable(collectives) {
  const headers = [
    { text: "Collective" }, { text: "Op" }, { text: "Phase" }, { text: "Group" },
    { text: "Bytes per rank", num: true }, { text: "Bytes (nccl-tests size)", num: true },
    { text: "Per step", num: true }, { text: "Ideal µs", num: true },
  ];
  const rows = collectives.map((c) => [
    c.label, c.op, c.phase, `${c.parallel_dim} × ${c.group_size}`, integer(c.bytes_per_rank),
    integer(c.bytes_total), integer(c.count_per_step), fixed(c.ideal_time_us, 1),
  ]);
  return table(headers, rows);
}

// PyTorch source models in framework mode also carry what PyTorch itself issued in the sandbox.
function capturedSection(documentForMode) {
  if (!documentForMode.captured || !documentForMode.captured.length) return null;
  const differences = documentForMode.capture_differences || [];
  return el("div", { class: "captured" }, [
    el("h3", { text: "Captured from PyTorch (fake process group, in the sandbox)" }),
    el("p", { class: "sub", text: differences.length
      ? "The captured list is the truth; it differs from the analytic one above:"
      : "Captured and analytic collectives agree." }),
    differences.length ? el("ul", { class: "notes capture-differences" }, differences.map((d) => el("li", { text: d }))) : null,
    collectivesTable(documentForMode.captured),
  ]);
}

function renderWorkload(container, documentForMode) {
  const model = documentForMode.model;
  const notes = (documentForMode.notes || []).map((note) => el("li", { text: note }));
  const parts = [
    el("p", { class: "sub", text: `${model.name}: ${integer(model.parameter_count)} parameters, ${integer(model.parameter_bytes)} bytes` }),
    collectivesTable(documentForMode.collectives),
    capturedSection(documentForMode),
    notes.length ? el("ul", { class: "notes" }, notes) : null,
  ];
  container.replaceChildren(...parts.filter(Boolean)); // replaceChildren would print a null as "null"
}

function renderMode(mode, result) {
  const card = document.getElementById(`mode-${mode}`);
  const kccb = card.querySelector(".kccb");
  const workload = document.querySelector(`#workload-${mode} .workload`);
  if (result.error) {
    kccb.replaceChildren(el("p", { class: "error", text: result.error }));
    workload.replaceChildren();
    return;
  }
  renderKccb(kccb, result.document);
  renderWorkload(workload, result.document);
}

function presetDefaults() {
  const option = form.model.selectedOptions[0];
  return option && option.dataset.defaults ? JSON.parse(option.dataset.defaults) : {};
}

// The mode a save stores: the one chosen, or the model's default (tutorial for the seed preset only).
function markSelectedMode() {
  const selected = form.mode.value || (presetDefaults().tutorial_by_default ? "tutorial" : "framework");
  for (const mode of MODES) document.getElementById(`mode-${mode}`).classList.toggle("selected", selected === mode);
}

// Empty fields mean "the model's default": show the defaults the planner filled in.
function showDefaultsFrom(documentForMode) {
  const inputs = documentForMode.inputs;
  for (const name of NUMBER_FIELDS) if (inputs[name] !== undefined) form[name].placeholder = inputs[name];
}

async function preview() {
  const serial = ++previewSerial;
  const results = await Promise.all(MODES.map(async (mode) => {
    try {
      return { document: await fetchJSON("/api/plans/preview", { json: request(mode) }) };
    } catch (error) {
      return { error: error.message };
    }
  }));
  if (serial !== previewSerial) return; // a newer preview is on its way
  lastDocuments = Object.fromEntries(MODES.map((mode, i) => [mode, results[i]]));
  const bothFailed = results.every((r) => r.error);
  showMessage(errorBox, bothFailed ? results[0].error : "");
  MODES.forEach((mode, i) => renderMode(mode, results[i]));
  const planned = results.find((r) => r.document);
  if (planned) showDefaultsFrom(planned.document);
  markSelectedMode();
  document.body.dataset.previewed = String(serial);
}

async function save() {
  const status = document.getElementById("save-status");
  const name = document.getElementById("plan-name").value.trim();
  const body = { ...request(form.mode.value || null) };
  if (body.mode === null) delete body.mode;
  try {
    const saved = await fetchJSON("/api/plans", { json: { ...body, name: name || null } });
    window.location.assign(`/plans/${saved.id}`);
  } catch (error) {
    status.textContent = "";
    showMessage(errorBox, error.message);
  }
}

async function uploadModel(event) {
  event.preventDefault();
  const modelForm = document.getElementById("model-form");
  const modelError = document.getElementById("model-error");
  if (!modelForm.file.files[0]) { showMessage(modelError, "Choose a model file first."); return; }
  const data = new FormData(modelForm);
  for (const [key, value] of [...data.entries()]) if (value === "") data.delete(key);
  const button = document.getElementById("model-upload");
  button.disabled = true;
  try {
    const model = await fetchJSON("/api/models", { method: "POST", body: data });
    const spec = `model:${model.id}`;
    document.getElementById("uploaded-models").append(
      el("option", { value: spec, text: `${model.name} (${model.source_kind}, #${model.id})` }));
    form.model.value = spec;
    showMessage(modelError, "");
    clearDefaults();
    preview();
  } catch (error) {
    showMessage(modelError, error.message);
  } finally {
    button.disabled = false;
  }
}

function fillInitial() {
  const initial = JSON.parse(inputsCard.dataset.initial || "{}");
  for (const [name, value] of Object.entries(initial)) {
    if (!form[name] || value === null || value === undefined) continue;
    if (form[name].tagName === "SELECT" && ![...form[name].options].some((o) => o.value === String(value))) {
      form[name].append(el("option", { value, text: value }));
    }
    form[name].value = value;
  }
}

fillInitial();
form.addEventListener("input", debounce(preview, 150));
form.model.addEventListener("change", clearDefaults);
form.addEventListener("submit", (event) => event.preventDefault());
document.getElementById("save-plan").addEventListener("click", save);
document.getElementById("model-form").addEventListener("submit", uploadModel);
preview();
