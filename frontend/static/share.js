// "Save and share" on /compare, and the share links of a saved comparison (create, label, list, revoke).
// A new link's token is shown once: the server keeps only its hash.
import { copyButton, el, fetchJSON, showMessage, url } from "./util.js";

const result = document.getElementById("share-result");
const errorBox = document.getElementById("share-error");
const expiry = document.getElementById("share-expiry");
const logBox = document.getElementById("log-x");

function showError(message) {
  showMessage(errorBox, message);
}

function expiryBody() {
  const label = document.getElementById("share-label");
  return {
    ...(expiry.value ? { expires_in_days: Number(expiry.value) } : {}),
    ...(label && label.value.trim() ? { label: label.value.trim() } : {}),
  };
}

// A link's label is edited in its row: whom or what it is for (the token is never shown again).
function labelInput(comparisonId, share) {
  return el("input", {
    type: "text", class: "share-label", maxlength: 200, value: share.label, "aria-label": `label of link #${share.id}`,
    onchange: async (event) => {
      try {
        await fetchJSON(url("change_share", { comparison_id: comparisonId, share_id: share.id }), { method: "PATCH", json: { label: event.target.value } });
        showError("");
      } catch (error) {
        showError(error.message);
      }
    },
  });
}

function showLink(share, comparisonId) {
  const link = new URL(share.path, window.location.origin).href;
  result.replaceChildren(
    el("p", { class: "ok", text: "Read-only link (shown once; copy it now):" }),
    el("div", { class: "copy-row" }, [el("code", { id: "share-url", text: link }), copyButton(link, "Copy link")]),
    comparisonId ? el("p", {}, [el("a", { href: url("saved_comparison_page", { comparison_id: comparisonId }), id: "manage-shares", text: "Manage this comparison's links" })]) : null,
  );
  result.hidden = false;
}

const when = (iso) => (iso ? iso.replace("T", " ").slice(0, 16) + " UTC" : "never");

async function refreshList(comparisonId) {
  const list = document.getElementById("share-list");
  const shares = await fetchJSON(url("list_shares", { comparison_id: comparisonId }));
  if (!shares.length) { list.replaceChildren(el("p", { class: "empty", text: "No share links yet." })); return; }
  const rows = shares.map((share) => el("tr", { "data-share-id": share.id }, [
    el("td", { class: "num", text: `#${share.id}` }),
    el("td", {}, labelInput(comparisonId, share)),
    el("td", {}, el("span", { class: `badge share-${share.state}`, text: share.state })),
    el("td", { text: when(share.created_at) }),
    el("td", { text: when(share.expires_at) }),
    el("td", { text: share.revoked_at ? when(share.revoked_at) : "" }),
    el("td", {}, share.state === "active"
      ? el("button", { type: "button", class: "secondary revoke", text: "Revoke", onclick: () => revoke(comparisonId, share.id) })
      : ""),
  ]));
  list.replaceChildren(el("div", { class: "table-wrap" }, el("table", { id: "share-table" }, [
    el("thead", {}, el("tr", {}, ["Link", "For", "State", "Created", "Expires", "Revoked", ""].map((text) => el("th", { text })))),
    el("tbody", {}, rows),
  ])));
}

async function revoke(comparisonId, shareId) {
  try {
    await fetchJSON(url("revoke_share", { comparison_id: comparisonId, share_id: shareId }), { method: "DELETE" });
    await refreshList(comparisonId);
  } catch (error) {
    showError(error.message);
  }
}

const saveButton = document.getElementById("save-and-share");
if (saveButton) {
  saveButton.addEventListener("click", async () => {
    showError("");
    saveButton.disabled = true;
    try {
      const comparison = await fetchJSON(url("create_comparison"), {
        json: {
          name: document.getElementById("save-name").value,
          run_ids: saveButton.dataset.runIds.split(",").map(Number),
          baseline_run_id: saveButton.dataset.baseline ? Number(saveButton.dataset.baseline) : null,
          options: { log_x: Boolean(logBox && logBox.checked) },
          // What the page shows is what is saved: the assumptions and plans of its URL.
          assumptions: JSON.parse(saveButton.dataset.assumptions || "{}"),
          plans: JSON.parse(saveButton.dataset.plans || "{}"),
        },
      });
      const share = await fetchJSON(url("create_share", { comparison_id: comparison.id }), { json: expiryBody() });
      showLink(share, comparison.id);
    } catch (error) {
      showError(error.message);
    } finally {
      saveButton.disabled = false;
    }
  });
}

const shares = document.getElementById("shares");
if (shares) {
  const comparisonId = shares.dataset.comparisonId;
  document.getElementById("share-create").addEventListener("click", async () => {
    showError("");
    try {
      showLink(await fetchJSON(url("create_share", { comparison_id: comparisonId }), { json: expiryBody() }), null);
      await refreshList(comparisonId);
    } catch (error) {
      showError(error.message);
    }
  });
  refreshList(comparisonId).catch((error) => showError(error.message));
}
