// Keyboard review: g/b judge and advance, 1-4 reasons, u undo, j/k history, ? help. No full page reloads (htmx).
(function () {
  let shownAt = performance.now();
  let historyIndex = null; // null = the current item

  function card() { return document.getElementById("item-card"); }
  function typing(e) { const t = e.target; return t && (t.tagName === "INPUT" && t.type === "text" || t.tagName === "TEXTAREA" || t.isContentEditable); }

  function showHistory(n) {
    const root = document.getElementById("review-root");
    const done = parseInt(card().dataset.nDone || "0", 10);
    if (n < 0) n = 0;
    if (n >= done) { historyIndex = null; htmx.ajax("GET", window.location.pathname, {target: "#item-card", swap: "outerHTML"}); return; }
    historyIndex = n;
    const url = root.dataset.historyUrl.replace(/\/0\/$/, "/" + n + "/");
    htmx.ajax("GET", url, {target: "#item-card", swap: "outerHTML"});
  }

  document.addEventListener("htmx:afterSwap", function () { shownAt = performance.now(); });
  document.addEventListener("htmx:configRequest", function (e) {
    if (e.detail.parameters && "seconds" in e.detail.parameters) {
      e.detail.parameters.seconds = ((performance.now() - shownAt) / 1000).toFixed(2);
    }
  });
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e)) return;
    const k = e.key;
    const c = card();
    if (!c) return;
    if (k === "?") { const d = document.getElementById("help"); d.open ? d.close() : d.showModal(); e.preventDefault(); return; }
    if (k === "g" || k === "b") {
      if (historyIndex !== null) return;
      const btn = document.getElementById(k === "g" ? "btn-good" : "btn-bad");
      if (btn) { btn.click(); e.preventDefault(); }
    } else if (k === "u") {
      const btn = document.getElementById("btn-undo"); if (btn) { historyIndex = null; btn.click(); e.preventDefault(); }
    } else if (k === "j") {
      const done = parseInt(c.dataset.nDone || "0", 10);
      showHistory(historyIndex === null ? done - 1 : historyIndex - 1); e.preventDefault();
    } else if (k === "k") {
      if (historyIndex !== null) { showHistory(historyIndex + 1); e.preventDefault(); }
    } else if (/^[1-4]$/.test(k)) {
      const boxes = c.querySelectorAll('input[name="reasons"]');
      const box = boxes[parseInt(k, 10) - 1]; if (box) { box.checked = !box.checked; e.preventDefault(); }
    }
  });
})();
