// The plan form: every input change previews the plan in both modes through the planner's API and
// redraws the KCCB settings and the workload table; nothing is computed here. Empty fields are left
// to the planner, whose choices show as placeholders; messages name the form's fields.
import { debounce, el, fetchJSON, showMessage, url } from "./util.js";
import { renderKccb, renderWorkload } from "./plan_render.js";

const form = document.getElementById("plan-form");
const inputsCard = document.getElementById("plan-inputs");
const errorBox = document.getElementById("plan-error");
const FIELDS = [...form.elements].filter((field) => field.name);
const FIELD = Object.fromEntries(FIELDS.map((field) => [field.name, field]));
const MODES = ["tutorial", "framework"];
// What an empty field means when the planner has no number to show for it.
const EMPTY_MEANS = { seq_len: "transformers only", bucket_cap_mb: "PyTorch's: 1, then 25", capacity_factor: "dropless",
  persistence_threshold: "zero3: DeepSpeed's 100000" };
let previewSerial = 0;
const skippedNote = document.getElementById("mode-skipped");
// Why a mode's card is not shown, said under the result (renderMode fills it each preview).
let notApplicable = [];

function request(mode) {
  const body = {};
  for (const field of FIELDS) {
    if (field.type === "checkbox") {
      if (field.checked !== (field.dataset.default === "true")) body[field.name] = field.checked;
    } else if (field.value.trim() !== "") {
      body[field.name] = field.type === "number" ? Number(field.value) : field.value;
    }
  }
  if (mode) body.mode = mode;
  return body;
}

// "batch_size: must be at least 1" → the field it is about and the rest, when it names a form field.
function splitField(message) {
  const match = /^(\w+): ([\s\S]*)$/.exec(message);
  return match && FIELD[match[1]] ? { field: match[1], text: match[2] } : { field: null, text: message };
}

function inPageWords(message) {
  const { field, text } = splitField(message);
  return field ? `${FIELD[field].dataset.label}: ${text}` : message;
}

function showFieldMessage(name, text) {
  const box = document.getElementById(`${name}-message`);
  showMessage(box, text);
  FIELD[name].toggleAttribute("aria-invalid", Boolean(text));
}

function clearMessages() {
  for (const field of FIELDS) showFieldMessage(field.name, "");
  showMessage(errorBox, "");
}

// A message about the inputs goes next to its field, or above the results when it names none.
function showInputMessage(message) {
  const { field, text } = splitField(message);
  if (field) showFieldMessage(field, text);
  else showMessage(errorBox, message);
}

function presetDefaults() {
  const option = FIELD.model.selectedOptions[0];
  return option && option.dataset.defaults ? JSON.parse(option.dataset.defaults) : {};
}

// The mode a save stores: the one chosen, or the model's default (tutorial for the seed preset only).
function savedMode() {
  return FIELD.mode.value || (presetDefaults().tutorial_by_default ? "tutorial" : "framework");
}

function clearDefaults() {
  for (const field of FIELDS) {
    if (field.type === "number") field.placeholder = "";
    const choice = field.querySelector && field.querySelector("option.default-choice");
    if (choice) choice.textContent = "default";
  }
}

// Empty fields mean "the model's default": show what the planner filled in.
function showDefaultsFrom(inputs) {
  for (const field of FIELDS) {
    const value = field.name === "mode" ? savedMode() : inputs[field.name];
    if (field.type === "number") field.placeholder = value ?? EMPTY_MEANS[field.name] ?? "";
    const choice = field.querySelector && field.querySelector("option.default-choice");
    if (choice) choice.textContent = value === null || value === undefined ? "default" : `default: ${value}`;
  }
}

function renderMode(mode, result, inputsWrong) {
  const card = document.getElementById(`mode-${mode}`);
  const kccb = card.querySelector(".kccb");
  const workloadCard = document.getElementById(`workload-${mode}`);
  const workload = workloadCard.querySelector(".workload");
  card.classList.toggle("selected", savedMode() === mode);
  workloadCard.hidden = false;
  card.hidden = false;
  if (result.document) {
    renderKccb(kccb, result.document);
    renderWorkload(workload, result.document);
    return;
  }
  // Only an input mistake or the mode a save keeps is an error, shown in its card. Another mode that cannot
  // plan these inputs (the tutorial rules and a hybrid strategy or a mixture of experts) does not apply: its
  // card goes, and one line under the result says why.
  const isError = inputsWrong || savedMode() === mode;
  workload.replaceChildren();
  workloadCard.hidden = true;
  if (isError) {
    kccb.replaceChildren(el("p", { class: "error", role: "note", text: inPageWords(result.error) }));
    return;
  }
  kccb.replaceChildren();
  card.hidden = true;
  notApplicable.push(`${card.querySelector("h2").textContent} do not apply here: ${inPageWords(result.error)}.`);
}

async function preview() {
  const serial = ++previewSerial;
  const badNumbers = FIELDS.filter((field) => field.validity.badInput);
  const results = await Promise.all(MODES.map(async (mode) => {
    try {
      return { document: await fetchJSON(url("preview_plan"), { json: request(mode) }) };
    } catch (error) {
      return { error: error.message };
    }
  }));
  if (serial !== previewSerial) return; // a newer preview is on its way
  clearMessages();
  for (const field of badNumbers) showFieldMessage(field.name, "not a number; left to the planner");
  const planned = results.find((result) => result.document);
  const inputsWrong = !planned;
  if (inputsWrong) {
    for (const result of results) if (splitField(result.error).field !== "mode") showInputMessage(result.error);
  }
  // Without a plan the planner has filled in nothing: old placeholders would show another plan's defaults.
  if (planned) showDefaultsFrom(planned.document.inputs);
  else clearDefaults();
  notApplicable = [];
  MODES.forEach((mode, i) => renderMode(mode, results[i], inputsWrong));
  showMessage(skippedNote, notApplicable.join(" "));
  document.body.dataset.previewed = String(serial);
}

async function save() {
  const status = document.getElementById("save-status");
  const name = document.getElementById("plan-name").value.trim();
  try {
    const platform = document.getElementById("plan-platform").value || null;
    const saved = await fetchJSON(url("create_plan"), { json: { ...request(FIELD.mode.value || null), name: name || null, platform } });
    window.location.assign(url("saved_plan_page", { plan_id: saved.id }));
  } catch (error) {
    status.textContent = "";
    showInputMessage(error.message);
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
    const model = await fetchJSON(url("upload_model"), { method: "POST", body: data });
    const spec = `model:${model.id}`;
    document.getElementById("uploaded-models").append(
      el("option", { value: spec, text: `${model.name} (${model.source_kind}, #${model.id})` }));
    FIELD.model.value = spec;
    showMessage(modelError, "");
    clearDefaults();
    preview();
  } catch (error) {
    showMessage(modelError, error.message);
  } finally {
    button.disabled = false;
  }
}

// "Edit as a new plan": the saved plan's request, exactly the fields its author set.
function fillInitial() {
  const initial = JSON.parse(inputsCard.dataset.initial || "{}");
  for (const [name, value] of Object.entries(initial)) {
    const field = FIELD[name];
    if (!field || value === null || value === undefined) continue;
    if (field.type === "checkbox") {
      field.checked = Boolean(value);
      continue;
    }
    if (field.tagName === "SELECT" && ![...field.options].some((option) => option.value === String(value))) {
      field.append(el("option", { value, text: value }));
    }
    field.value = value;
  }
}

fillInitial();
form.addEventListener("input", debounce(preview, 150));
FIELD.model.addEventListener("change", clearDefaults);
form.addEventListener("submit", (event) => event.preventDefault());
// Saving and uploading are on the page for the roles that may do them only (a viewer previews).
document.getElementById("save-plan")?.addEventListener("click", save);
document.getElementById("model-form")?.addEventListener("submit", uploadModel);
preview();
