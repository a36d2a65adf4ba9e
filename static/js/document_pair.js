"use strict";
// Hover or focus a sentence: its aligned partner lights up on the other side.
document.querySelectorAll("#doc-pair li.linked").forEach(function (li) {
  const on = function (v) { document.querySelectorAll('#doc-pair li[data-pair="' + li.dataset.pair + '"]').forEach(function (x) { x.classList.toggle("hl", v); }); };
  li.addEventListener("mouseenter", function () { on(true); }); li.addEventListener("mouseleave", function () { on(false); });
  li.addEventListener("focus", function () { on(true); }); li.addEventListener("blur", function () { on(false); });
});
