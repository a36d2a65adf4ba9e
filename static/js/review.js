// Keyboard review: g/b judge and advance, 1-4 reasons, u undo, j/k history, ? help. No full page reloads (htmx).
(function () {
  let shownAt = performance.now();
  let historyIndex = null; // null = the current item
  let busy = false; // one request at a time: fast typing never submits twice or natively

  // A refused submission (409: stale or duplicate) answers with the current card and its message: show it.
  htmx.config.responseHandling = [
    {code: "204", swap: false}, {code: "[23]..", swap: true}, {code: "409", swap: true, error: false},
    {code: "[45]..", swap: false, error: true}, {code: "...", swap: false},
  ];

  function card() { return document.getElementById("item-card"); }
  function typing(e) {
    const t = e.target;
    return t && ((t.tagName === "INPUT" && t.type === "text") || t.tagName === "TEXTAREA" || t.isContentEditable);
  }
  function post(form, values) {
    if (busy || !form) return;
    busy = true;
    htmx.ajax("POST", form.getAttribute("hx-post"), {source: form, target: "#item-card", swap: "outerHTML", values: values});
  }
  function judge(verdict) {
    post(document.getElementById("label-form"),
         {verdict: verdict, seconds: ((performance.now() - shownAt) / 1000).toFixed(3)});
  }
  function showHistory(n) {
    const root = document.getElementById("review-root");
    const done = parseInt(card().dataset.nDone || "0", 10);
    if (n < 0) n = 0;
    if (n >= done) {
      historyIndex = null;
      htmx.ajax("GET", window.location.pathname, {target: "#item-card", swap: "outerHTML"});
      return;
    }
    historyIndex = n;
    htmx.ajax("GET", root.dataset.historyUrl.replace(/\/0\/$/, "/" + n + "/"), {target: "#item-card", swap: "outerHTML"});
  }

  document.addEventListener("htmx:afterSwap", function () { shownAt = performance.now(); });
  document.addEventListener("htmx:afterRequest", function () { busy = false; });
  // Mouse users: the GOOD/BAD buttons go through the same path as the keys.
  document.addEventListener("click", function (e) {
    const btn = e.target.closest && e.target.closest("#btn-good, #btn-bad");
    if (btn) { e.preventDefault(); judge(btn.value); }
  });
  document.documentElement.dataset.reviewKeys = "ready";
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e)) return;
    const k = e.key;
    const c = card();
    if (!c) return;
    if (k === "?") { const d = document.getElementById("help"); d.open ? d.close() : d.showModal(); e.preventDefault(); return; }
    if (k === "g" || k === "b") {
      if (historyIndex === null) { judge(k === "g" ? "GOOD" : "BAD"); e.preventDefault(); }
    } else if (k === "u") {
      historyIndex = null;
      const undo = c.querySelector(".undo-form");
      if (undo) { post(undo, {}); e.preventDefault(); }
    } else if (k === "j") {
      const done = parseInt(c.dataset.nDone || "0", 10);
      showHistory(historyIndex === null ? done - 1 : historyIndex - 1); e.preventDefault();
    } else if (k === "k") {
      if (historyIndex !== null) { showHistory(historyIndex + 1); e.preventDefault(); }
    } else if (/^[1-4]$/.test(k)) {
      const box = c.querySelectorAll('input[name="reasons"]')[parseInt(k, 10) - 1];
      if (box) { box.checked = !box.checked; e.preventDefault(); }
    }
  });
})();
