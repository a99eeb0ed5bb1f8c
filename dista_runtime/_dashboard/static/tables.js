// Keyed table rows and the number formats the page uses: window.DistaTables.
//
// A state arrives every second; rebuilding every table with innerHTML would recreate
// thousands of nodes a second, lose the text a person selected and the scroll position.
// `syncRows` keeps one <tr> per key, touches a cell only when its content changed, and
// moves rows only when their order changed.
"use strict";

window.DistaTables = (() => {
  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

  function bytes(n) {
    if (n === null || n === undefined) return "–";
    let i = 0;
    while (n >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)) + " " + UNITS[i];
  }

  function count(n) {
    return n === null || n === undefined ? "–" : n.toLocaleString("en-US");
  }

  function duration(us) {
    if (us < 0) return "–";
    if (us < 1000) return us + " µs";
    if (us < 1e6) return (us / 1000).toFixed(us < 1e4 ? 2 : 1) + " ms";
    if (us < 6e7) return (us / 1e6).toFixed(us < 1e7 ? 2 : 1) + " s";
    const s = Math.round(us / 1e6);
    return Math.floor(s / 60) + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
  }

  function seconds(s) { return duration(Math.round(s * 1e6)); }

  // A cell is a string/number (its text) or {text, cls, title, meter: [[cls, value]...], of}.
  function render(td, spec) {
    if (spec === null || typeof spec !== "object") {
      td.textContent = spec === null || spec === undefined ? "" : String(spec);
      td.className = typeof spec === "number" ? "num" : "";
      return;
    }
    td.className = spec.cls || "";
    td.title = spec.title || "";
    if (!spec.meter) {
      if (spec.badge) {
        td.replaceChildren(Object.assign(document.createElement("span"),
          { className: "badge " + spec.badge, textContent: spec.text }));
      } else if (spec.chip) {
        const chip = Object.assign(document.createElement("span"), { className: "chip" });
        chip.style.background = spec.chip;
        td.replaceChildren(chip, document.createTextNode(spec.text));
      } else {
        td.textContent = spec.text;
      }
      return;
    }
    const total = spec.of || spec.meter.reduce((a, [, v]) => a + v, 0) || 1;
    const meter = Object.assign(document.createElement("div"), { className: "meter" });
    for (const [cls, value] of spec.meter) {
      if (value <= 0) continue;
      const seg = Object.assign(document.createElement("span"), { className: "seg-" + cls });
      seg.style.width = (100 * value / total).toFixed(2) + "%";
      meter.append(seg);
    }
    const wrap = Object.assign(document.createElement("div"), { className: "cell-meter" });
    wrap.append(meter, Object.assign(document.createElement("small"), { textContent: spec.text }));
    td.replaceChildren(wrap);
  }

  // Make `table`'s body show `items` in order: one row per keyOf(item), cells from
  // cellsOf(item), data-* attributes from dataOf(item) (what a browser test looks for).
  function syncRows(table, items, keyOf, cellsOf, dataOf) {
    const body = table.tBodies[0];
    const old = body._keyed || new Map();
    const kept = new Map();
    let previous = null;
    for (const item of items) {
      const key = String(keyOf(item));
      let tr = old.get(key);
      if (!tr || kept.has(key)) {
        tr = document.createElement("tr");
        tr._cells = [];
      }
      const cells = cellsOf(item);
      while (tr.cells.length < cells.length) tr.insertCell();
      cells.forEach((spec, i) => {
        const sig = typeof spec === "object" && spec !== null ? JSON.stringify(spec) : spec;
        if (tr._cells[i] !== sig) { render(tr.cells[i], spec); tr._cells[i] = sig; }
      });
      const data = Object.assign({ key }, dataOf ? dataOf(item) : {});
      for (const [name, value] of Object.entries(data)) {
        if (tr.dataset[name] !== String(value)) tr.dataset[name] = String(value);
      }
      const want = previous ? previous.nextSibling : body.firstChild;
      if (want !== tr) body.insertBefore(tr, want);
      previous = tr;
      kept.set(key, tr);
    }
    for (const [key, tr] of old) if (!kept.has(key)) tr.remove();
    body._keyed = kept;
    const empty = table.parentElement.querySelector(".empty");
    if (empty) empty.hidden = items.length > 0;
  }

  return { bytes, count, duration, seconds, syncRows };
})();
