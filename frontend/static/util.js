// Small helpers every page module shares. DOM is built with textContent only: user strings never
// reach innerHTML.

export function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of [].concat(children)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Shows a message in an alert box, or hides the box when the message is empty.
export function showMessage(box, message) {
  box.textContent = message;
  box.hidden = !message;
}

// The server's own message: {"detail": "..."} (string or FastAPI's list of field errors).
export function errorMessage(status, body) {
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((item) => `${(item.loc || []).filter((part) => part !== "body").join(".")}: ${item.msg}`).join("\n");
  }
  return `The server answered ${status}.`;
}

// The path of the server's route `name` (the name= of its Python route, e.g. "run_page"), its {params}
// filled in and `query` after it (empty values left out): the one way a script writes a URL. The table of
// routes comes with the page (base.html's <body data-routes>), so no path is spelled here.
let routes = null;
export function url(name, params = {}, query = {}) {
  routes ??= JSON.parse(document.body.dataset.routes);
  if (!(name in routes)) throw new Error(`No route named ${name}`);
  const path = routes[name].replace(/\{(\w+)(:\w+)?\}/g, (_, key) => encodeURIComponent(params[key]));
  const kept = Object.entries(query).filter(([, value]) => value !== null && value !== undefined && value !== "");
  return kept.length ? `${path}?${new URLSearchParams(kept)}` : path;
}

export async function fetchJSON(url, options = {}) {
  const init = { headers: { Accept: "application/json" }, ...options };
  if (options.json !== undefined) {
    init.method = init.method || "POST";
    init.headers = { ...init.headers, "Content-Type": "application/json" };
    init.body = JSON.stringify(options.json);
    delete init.json;
  }
  const response = await fetch(url, init);
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = null; }
  if (!response.ok) throw new Error(errorMessage(response.status, body));
  return body;
}

// One formatter per number of digits: toLocaleString with options builds a new Intl.NumberFormat on every
// call, which was most of the time a comparison's tables took to render.
// signDisplay "negative": a difference that rounds to nothing is "0.00", not "-0.00" (wording.time_in).
const formatters = new Map();

function formatter(digits) {
  if (!formatters.has(digits)) {
    formatters.set(digits, new Intl.NumberFormat("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits, signDisplay: "negative" }));
  }
  return formatters.get(digits);
}

const plain = new Intl.NumberFormat("en-US");

export const integer = (value) => (value === null || value === undefined ? "" : plain.format(Number(value)));

export const plural = (count, one, many = `${one}s`) => `${integer(count)} ${count === 1 ? one : many}`;

export function fixed(value, digits = 3) {
  if (value === null || value === undefined || Number.isNaN(value)) return "";
  return formatter(digits).format(Number(value));
}

// Figures: the twins of backend/emuplan/wording.py, one rule per kind of figure (see there): nccl-tests cells
// as the log printed them, computed times in their header's unit (µs to 0.1, ms to 0.01, s to 0.001),
// bandwidths to 0.01 GB/s, % of ideal to 0.1, ratios to 3 significant figures.
const MISSING = "—";
const NCCL_TESTS_WIDTHS = { time_us: 7, algbw_gbps: 6, busbw_gbps: 6 };
const TIME_DECIMALS = { "µs": 1, ms: 2, s: 3 };
const US_PER_UNIT = { "µs": 1, ms: 1e3, s: 1e6 };
const missing = (value) => value === null || value === undefined || Number.isNaN(value);

// A nccl-tests cell as the log printed it; without the printed text, as nccl-tests prints a cell
// (src/util.cu getFloatStr: two decimals if they fit the column's width, else one, else none).
export function asPrinted(value, printed, key = "busbw_gbps") {
  if (printed) return printed;
  if (missing(value)) return MISSING;
  const width = NCCL_TESTS_WIDTHS[key];
  for (const decimals of [2, 1, 0]) {
    const text = Number(value).toFixed(decimals);
    if (text.length <= width) return text;
  }
  return Number(value).toExponential(width >= 7 ? 1 : 0).replace(/e([+-])(\d)$/, "e$10$2");
}

export const timeIn = (valueUs, unit = "µs") => (missing(valueUs) ? MISSING : fixed(valueUs / US_PER_UNIT[unit], TIME_DECIMALS[unit]));
export const gbps = (value) => (missing(value) ? MISSING : fixed(value, 2));
export const percent = (value) => (missing(value) ? MISSING : fixed(value, 1));

// 3 significant figures: 0.998, 0.000650, 350, never 0.00 (Python's "#.3g" without a trailing point: an
// exponent below 1e-4 and from 1e3, two digits at least).
export function ratio(value) {
  if (missing(value)) return MISSING;
  const number = Number(value);
  const magnitude = Math.abs(number);
  const text = magnitude !== 0 && magnitude < 1e-4 ? number.toExponential(2) : number.toPrecision(3);
  return text.replace(/e([+-])(\d)$/, "e$10$2");
}

export const ksStatistic = (value) => fixed(value, 4);
export const pValue = (value) => (value === 0 ? "< 1e-300" : ratio(value));

export function copyButton(text, label = "Copy") {
  const button = el("button", { type: "button", class: "secondary copy", "data-copy": text, text: label });
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch {
      // Clipboard access needs a secure context; select the text so Ctrl+C works instead.
      const range = document.createRange();
      range.selectNodeContents(button.previousElementSibling || button);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      button.textContent = "Selected: press Ctrl+C";
    }
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  return button;
}

export function debounce(fn, ms) {
  let timer;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

export function table(headers, rows) {
  // headers: [{text, num, sub}], rows: arrays of cells (strings/nodes) aligned with headers; `sub` is
  // a second, smaller header line (the assumption a column's numbers rest on).
  const head = el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.num ? "num" : null },
    h.sub ? [h.text, el("br"), el("small", { class: "th-sub", text: h.sub })] : h.text))));
  const body = el("tbody", {}, rows.map((row) => el("tr", { class: row.className || null },
    row.map((cell, i) => el("td", { class: headers[i].num ? "num" : null }, cell)))));
  return el("div", { class: "table-wrap" }, el("table", {}, [head, body]));
}

// A datetime-local input's value (in the browser's time zone, without an offset) as the ISO 8601 time in UTC
// that the API asks for: a time without its offset is refused there rather than guessed.
export function utcFromLocal(value) {
  return new Date(value).toISOString();
}
