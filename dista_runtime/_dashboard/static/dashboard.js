// The page: one EventSource (/events) and what each of its events changes.
//
// "state" is the whole view model (built by dista_runtime/_dashboard/view.py), "rows" the
// timeline rows the chart has not seen. No refresh loop: the server pushes on each change
// and the browser's EventSource reconnects by itself, which the header says meanwhile.
"use strict";

(() => {
  const T = window.DistaTables;
  const $ = (id) => document.getElementById(id);
  const num = (text) => ({ text, cls: "num" });
  const gantt = new window.DistaGantt.Gantt($("gantt-canvas"), $("tooltip"));
  const probe = { rows: 0, lastUpdate: 0, drawMs: 0, version: 0, status: "connecting" };
  // What a browser test reads; redraw() draws now and answers how long it took (ms).
  probe.redraw = () => { gantt.draw(); return gantt.drawMs; };
  window.distaDashboard = probe;
  let state = null;
  let legendKey = "";

  function setStatus(kind, text) {
    const el = $("status");
    el.className = "status " + kind;
    el.dataset.status = kind;
    el.textContent = text;
    probe.status = kind;
  }

  function onState(next) {
    state = next;
    probe.version = state.version;
    probe.lastUpdate = Date.now();
    if (state.version === 0) setStatus("connecting", "waiting for the head…");
    else if (state.up) setStatus("live", "live");
    else setStatus("unreachable", "head unreachable" + (state.why ? ": " + state.why : ""));
    header();
    gantt.setState(state);
    progress();
    workers();
    queues();
    functions();
    objects();
    actors();
    legend();
  }

  function header() {
    const totals = state.totals || {};
    const failed = state.drivers.reduce((n, d) => n + d.failed, 0);
    const values = {
      epoch: state.epoch || "–",
      workers: T.count(state.workers.filter((w) => !["lost", "drained"].includes(w.state)).length),
      running: T.count(totals.running), pending: T.count(totals.pending),
      objects: T.count(totals.objects), held_bytes: T.bytes(totals.held_bytes),
      failed: T.count(failed), updated: new Date().toLocaleTimeString(),
    };
    for (const dd of document.querySelectorAll("#totals dd")) {
      const v = String(values[dd.dataset.total]);
      if (dd.textContent !== v) dd.textContent = v;
    }
  }

  function progress() {
    T.syncRows($("progress"), state.drivers, (d) => d.number, (d) => [
      d.label, d.submitted, d.finished, d.failed, d.retried, d.outstanding,
      { meter: [["finished", d.finished - d.failed], ["failed", d.failed], ["running", d.running],
        ["queued", d.queued], ["waiting", d.waiting]],
        text: `${T.count(d.outstanding)} to go · ${T.count(d.running)} running`,
        title: `queued ${d.queued}, waiting on inputs ${d.waiting}` },
    ], (d) => ({ driver: d.number }));
  }

  function workers() {
    T.syncRows($("workers"), state.workers, (w) => w.address, (w) => {
      const gone = w.state === "lost" || w.state === "drained";
      const when = gone ? ` ${T.seconds(w.ago_s)} ago` : w.state === "silent" ? ` ${T.seconds(w.silent_s)}` : "";
      const tasks = w.tasks.map((t) => `${t.name} (${T.seconds(t.running_s)})`).join(", ");
      return [
        { text: w.label, cls: "mono" },
        { text: w.state + when, badge: w.state, title: w.why },
        gone ? "" : { meter: [["busy", w.busy]], of: w.slots || 1,
          text: `${w.busy} busy · ${w.free} free` },
        { text: tasks || (w.why ? w.why : ""), cls: tasks ? "tasks" : "why" },
        w.holding, num(T.bytes(w.held_bytes)), num(T.bytes(w.rss)), w.actor || "",
        gone ? "" : w.checkpoints ? "yes" : "no",
      ];
    }, (w) => ({ address: w.address, state: w.state }));
  }

  function queues() {
    T.syncRows($("queues"), state.queues, (q) => `${q.driver}|${q.function}|${q.state}|${q.reason}`,
      (q) => [{ text: q.driver, cls: "wrap" }, chipped(q.function), { text: q.state, badge: q.state }, q.count,
        { text: q.reason, cls: "why" }],
      (q) => ({ state: q.state }));
  }

  function chipped(name) {
    return name ? { text: name, chip: window.DistaGantt.colorOf(name) } : "";
  }

  function functions() {
    T.syncRows($("functions"), state.functions, (f) => f.id, (f) => [
      chipped(f.name), f.submitted, f.finished, f.failed, f.retried, f.queued, f.waiting,
    ], (f) => ({ id: f.id }));
  }

  function objects() {
    const o = state.objects;
    $("objects-total").textContent = `${T.count(o.count)} objects · ${T.bytes(o.bytes)}`;
    const byBytes = [...o.by_worker].sort((a, b) => b.bytes - a.bytes);
    T.syncRows($("objects-by-worker"), byBytes, (w) => w.worker,
      (w) => [{ text: w.worker, cls: "mono" }, w.count, num(T.bytes(w.bytes))]);
    T.syncRows($("objects-by-driver"), o.by_driver, (d) => d.driver,
      (d) => [d.driver, d.count, num(T.bytes(d.bytes))]);
    T.syncRows($("objects-largest"), o.largest, (l) => l.object, (l) => [
      { text: l.object, cls: "mono" }, num(T.bytes(l.bytes)),
      l.function || "", l.driver || "", { text: l.where, cls: "mono" },
    ]);
  }

  function actors() {
    T.syncRows($("actors"), state.actors, (a) => a.id, (a) => [
      { text: a.name ? `${a.class} '${a.name}'` : a.class, title: a.id },
      { text: a.state, badge: a.state }, { text: a.worker || "–", cls: "mono" },
      a.calls, a.unanswered,
      // The last checkpoint, by the calls it covers (what a restore comes back to).
      a.covered >= 0 ? `${a.checkpoints} (last covers ${a.covered} calls)` : "none yet",
      a.restarts, { text: a.why, cls: "why" },
    ], (a) => ({ id: a.id, state: a.state }));
  }

  function legend() {
    const names = [...new Set(state.names)].sort();
    const key = names.join("\n");
    if (key === legendKey) return;
    legendKey = key;
    const items = names.map((name) => {
      const span = document.createElement("span");
      const chip = Object.assign(document.createElement("span"), { className: "chip" });
      chip.style.background = window.DistaGantt.colorOf(name);
      span.append(chip, name);
      return span;
    });
    const failed = Object.assign(document.createElement("span"),
      { className: "failed-key", textContent: "▭ red outline: failed" });
    $("legend").replaceChildren(...items, failed);
  }

  function onRows(message) {
    if (message.first) gantt.reset();
    gantt.addRows(message.rows, state);
    probe.rows = gantt.count;
    probe.lastUpdate = Date.now();
  }

  function viewChanged() {
    const on = gantt.follow;
    $("follow").classList.toggle("on", on);
    $("follow").setAttribute("aria-pressed", String(on));
  }

  function wire() {
    const canvas = $("gantt-canvas");
    gantt.onChange = viewChanged;
    const afterDraw = gantt.draw.bind(gantt);
    gantt.draw = () => {
      afterDraw();
      probe.drawMs = gantt.drawMs;
      probe.rows = gantt.count;
      if (state) {
        $("gantt-count").textContent = `${T.count(gantt.count)} tasks in the last ${T.seconds(state.rows.window_s)}`;
        $("gantt-window").textContent = `${T.duration(Math.round(gantt.span))} shown${gantt.follow ? ", following live" : ""}`;
      }
    };
    canvas.addEventListener("wheel", (e) => {
      e.preventDefault();
      gantt.zoom(Math.exp(e.deltaY * 0.0015), e.offsetX);
    }, { passive: false });
    let drag = null;
    canvas.addEventListener("mousedown", (e) => {
      drag = { x: e.clientX };
      canvas.classList.add("dragging");
      $("tooltip").hidden = true;
    });
    window.addEventListener("mousemove", (e) => {
      if (drag) {
        const perPx = gantt.span / (gantt.width - window.DistaGantt.LABEL_W - 8);
        gantt.pan(-(e.clientX - drag.x) * perPx);
        drag.x = e.clientX;
      }
    });
    window.addEventListener("mouseup", () => { drag = null; canvas.classList.remove("dragging"); });
    canvas.addEventListener("mousemove", (e) => { if (!drag) tooltip(e); });
    canvas.addEventListener("mouseleave", () => { $("tooltip").hidden = true; });
    $("follow").addEventListener("click", () => {
      gantt.follow = !gantt.follow;
      if (!gantt.follow) gantt.end = gantt.now();
      viewChanged();
      gantt.requestDraw();
    });
    $("zoom-in").addEventListener("click", () => gantt.zoom(0.5));
    $("zoom-out").addEventListener("click", () => gantt.zoom(2));
    $("zoom-all").addEventListener("click", () => gantt.showAll());
    new ResizeObserver(() => gantt.requestDraw()).observe($("gantt"));
    // Following live moves the chart between events (new rows come once a second): two
    // frames a second is enough, and a hidden tab draws none (its browser may share the
    // head's machine: benchmarks/dashboard.py).
    setInterval(() => {
      if (gantt.follow && state && state.up && !document.hidden) gantt.requestDraw();
    }, 500);
  }

  function tooltip(e) {
    const tip = $("tooltip");
    const found = gantt.hit(e.offsetX, e.offsetY);
    if (!found) { tip.hidden = true; return; }
    const lines = gantt.describe(found).map(([k, v], i) => {
      const div = document.createElement("div");
      if (i === 0) {
        div.append(Object.assign(document.createElement("b"), { textContent: k }));
        if (v) div.append(" ", Object.assign(document.createElement("span"), { className: "bad", textContent: v }));
      } else {
        div.textContent = `${k}: ${v}`;
      }
      return div;
    });
    tip.replaceChildren(...lines);
    tip.hidden = false;
    const box = $("gantt").getBoundingClientRect();
    const left = Math.min(e.offsetX + 14, box.width - tip.offsetWidth - 4);
    tip.style.left = left + "px";
    tip.style.top = (e.offsetY + 14) + "px";
  }

  function connect() {
    const events = new EventSource("/events");
    events.addEventListener("state", (e) => onState(JSON.parse(e.data)));
    events.addEventListener("rows", (e) => { if (state) onRows(JSON.parse(e.data)); });
    events.onerror = () => {
      if (events.readyState !== EventSource.OPEN) setStatus("reconnecting", "reconnecting…");
    };
  }

  wire();
  connect();
})();
