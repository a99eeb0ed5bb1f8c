// The task stream as a Gantt chart on a <canvas>: window.DistaGantt.
//
// One lane per worker slot. Lanes are assigned greedily per worker: a row goes into the
// first lane where it overlaps nothing, so each lane stays sorted by start and by end at
// once, and a draw finds the visible rows of a lane with one binary search. A draw visits
// only visible rows, skips a bar whose pixel is already painted, and fills all bars of a
// function with one path: 100,000 rows cost a few milliseconds, not a frame each.
"use strict";

window.DistaGantt = (() => {
  const T = window.DistaTables;
  const LABEL_W = 190, AXIS_H = 22, MAX_H = 760, MIN_LANE = 3, MAX_LANE = 18;
  const NICE_STEPS = [1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 15e6,
    3e7, 6e7, 12e7, 3e8, 6e8, 18e8, 36e8];
  const colors = new Map();

  // A stable color per function name: a hash picks one of a palette of distinct colors
  // (red is kept for failures), the next free one if taken; once given, a name keeps its
  // color for the page's life. Past the palette, a hue from the hash.
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f",
    "#ff9da7", "#a0cbe8", "#ffbe7d", "#8cd17d", "#499894", "#d4a6c8", "#bab0ac"];
  const taken = new Set();
  function colorOf(name) {
    let c = colors.get(name);
    if (c) return c;
    let h = 2166136261;
    for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
    h >>>= 0;
    for (let k = 0; k < PALETTE.length && !c; k++) {
      const candidate = PALETTE[(h + k) % PALETTE.length];
      if (!taken.has(candidate)) c = candidate;
    }
    c = c || `hsl(${(h * 137.508) % 360 | 0}, ${50 + (h >>> 9) % 25}%, ${45 + (h >>> 17) % 20}%)`;
    taken.add(c);
    colors.set(name, c);
    return c;
  }

  // The first index in `lane` whose row ends at or after `t` (ends are sorted too).
  function firstEndingAfter(lane, t) {
    let lo = 0, hi = lane.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (lane[mid].e < t) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function firstStartingAt(lane, t) {
    let lo = 0, hi = lane.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (lane[mid].s < t) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function place(lanes, row) {
    for (const lane of lanes) {
      const n = lane.length;
      if (n === 0 || lane[n - 1].e <= row.s) { lane.push(row); return; }
      const i = firstStartingAt(lane, row.s);
      if ((i === 0 || lane[i - 1].e <= row.s) && (i === n || lane[i].s >= row.e)) {
        lane.splice(i, 0, row);
        return;
      }
    }
    lanes.push([row]);
  }

  function clock(baseMs, us, withMs) {
    const d = new Date(baseMs + us / 1000);
    const p = (n, w = 2) => String(n).padStart(w, "0");
    const hms = `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
    return withMs ? `${hms}.${p(d.getMilliseconds(), 3)}` : hms;
  }

  class Gantt {
    constructor(canvas, tooltip) {
      this.canvas = canvas;
      this.tooltip = tooltip;
      this.ctx = canvas.getContext("2d");
      this.groups = new Map();   // address -> {label, state, slots, lanes, running}
      this.order = [];
      this.count = 0;
      this.state = null;
      this.receivedAt = 0;
      this.follow = true;
      this.span = 60e6;          // µs shown
      this.end = 0;              // µs at the right edge when not following
      this.drawMs = 0;
      this.pending = false;
      this.onChange = () => {};
    }

    reset() { this.groups.clear(); this.order = []; this.count = 0; }

    group(address, label) {
      let g = this.groups.get(address);
      if (!g) {
        g = { address, label: label || address, state: "", slots: 0, lanes: [], running: [] };
        this.groups.set(address, g);
      }
      return g;
    }

    addRows(wire, state) {
      const rows = wire.map(([f, w, s, d, q, p, x, o]) => ({ f, w, s, e: s + d, q, p, x, o }));
      rows.sort((a, b) => a.s - b.s);
      for (const row of rows) {
        const [address, label] = state.row_workers[row.w] || [`#${row.w}`, `#${row.w}`];
        place(this.group(address, label).lanes, row);
      }
      this.count += rows.length;
      this.requestDraw();
    }

    setState(state) {
      this.state = state;
      this.receivedAt = performance.now();
      const since = state.rows.since_us;
      const listed = new Set();
      for (const w of state.workers) {
        const g = this.group(w.address, w.label);
        Object.assign(g, { label: w.label, state: w.state, slots: w.slots, running: w.tasks });
        listed.add(w.address);
      }
      for (const [address, g] of this.groups) {
        for (const lane of g.lanes) {
          const old = firstEndingAfter(lane, since);
          if (old > 0) { lane.splice(0, old); this.count -= old; }
        }
        g.lanes = g.lanes.filter((lane, i) => lane.length > 0 || i < g.slots);
        if (!listed.has(address)) {
          if (g.lanes.every((lane) => lane.length === 0)) this.groups.delete(address);
          else g.state = g.state || "gone";
        }
      }
      this.order = [...listed, ...[...this.groups.keys()].filter((a) => !listed.has(a))];
      this.requestDraw();
    }

    now() {
      if (!this.state) return 0;
      return this.state.now_us + (this.state.up ? (performance.now() - this.receivedAt) * 1000 : 0);
    }

    view() {
      const now = this.now();
      const end = this.follow ? now : this.end;
      return [end - this.span, end];
    }

    zoom(factor, anchorX) {
      const [v0, v1] = this.view();
      const oldSpan = this.span;
      const kept = this.state ? Math.max(1e6, this.now() - this.state.rows.since_us) : 6e8;
      this.span = Math.min(Math.max(this.span * factor, 1e3), kept * 1.05);
      if (!this.follow) {
        const plotW = this.width - LABEL_W - 8;
        const frac = anchorX === undefined ? 0.5 : Math.min(1, Math.max(0, (anchorX - LABEL_W) / plotW));
        const anchor = v0 + frac * (v1 - v0);
        this.end = anchor + (v1 - anchor) * this.span / oldSpan;
      }
      this.requestDraw();
    }

    pan(deltaUs) {
      if (this.follow) { this.end = this.now(); this.follow = false; this.onChange(); }
      this.end = Math.min(this.end + deltaUs, this.now() + this.span * 0.05);
      this.requestDraw();
    }

    showAll() {
      if (!this.state) return;
      this.span = Math.max(1e6, (this.now() - this.state.rows.since_us) * 1.02);
      this.follow = true;
      this.onChange();
      this.requestDraw();
    }

    requestDraw() {
      if (this.pending) return;
      this.pending = true;
      requestAnimationFrame(() => { this.pending = false; this.draw(); });
    }

    layout() {
      // (Rows may come before the state that lists their workers: draw what is known.)
      this.order = this.order.filter((a) => this.groups.has(a));
      const lanes = this.order.reduce(
        (n, a) => n + Math.max(1, this.groups.get(a).slots, this.groups.get(a).lanes.length), 0);
      const laneH = Math.max(MIN_LANE, Math.min(MAX_LANE, Math.floor(MAX_H / Math.max(1, lanes))));
      const gap = laneH >= 8 ? 3 : 1;
      let y = AXIS_H;
      const rows = [];
      for (const address of this.order) {
        const g = this.groups.get(address);
        const n = Math.max(1, g.slots, g.lanes.length);
        rows.push({ g, y, n });
        y += n * laneH + gap;
      }
      return { rows, laneH, height: y + 4 };
    }

    draw() {
      const started = performance.now();
      const width = this.canvas.parentElement.clientWidth;
      const lay = this.layout();
      const dpr = window.devicePixelRatio || 1;
      if (this.canvas.width !== Math.round(width * dpr) || this.canvas.height !== Math.round(lay.height * dpr)) {
        this.canvas.width = Math.round(width * dpr);
        this.canvas.height = Math.round(lay.height * dpr);
        this.canvas.style.height = lay.height + "px";
      }
      this.width = width;
      this.lay = lay;
      const ctx = this.ctx;
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, width, lay.height);
      if (!this.state) return;
      const [v0, v1] = this.view();
      const plotW = width - LABEL_W - 8;
      const scale = plotW / (v1 - v0);
      const xOf = (t) => LABEL_W + (t - v0) * scale;
      this.drawFrame(ctx, lay, v0, v1, plotW, xOf);
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL_W, AXIS_H, plotW, lay.height - AXIS_H);
      ctx.clip();
      this.drawBars(ctx, lay, v0, v1, xOf);
      this.drawRunning(ctx, lay, xOf);
      const nowX = xOf(this.now());
      ctx.strokeStyle = "#172033";
      ctx.setLineDash([4, 3]);
      ctx.beginPath(); ctx.moveTo(nowX, AXIS_H); ctx.lineTo(nowX, lay.height); ctx.stroke();
      ctx.setLineDash([]);
      ctx.restore();
      this.drawMs = performance.now() - started;
    }

    drawFrame(ctx, lay, v0, v1, plotW, xOf) {
      ctx.font = "11px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      const labelEvery = Math.max(1, Math.ceil(12 / Math.max(1, lay.rows[0] ? lay.rows[0].n * lay.laneH : 12)));
      lay.rows.forEach(({ g, y, n }, i) => {
        const h = n * lay.laneH;
        ctx.fillStyle = i % 2 ? "#f4f6f9" : "#fbfcfd";
        ctx.fillRect(0, y, this.width, h);
        if (i % labelEvery) return;
        const gone = g.state === "lost" || g.state === "drained" || g.state === "gone";
        ctx.fillStyle = gone ? "#98a2b3" : "#1d2430";
        const text = gone ? `${g.label} · ${g.state}` : g.label;
        ctx.fillText(this.fit(ctx, text, LABEL_W - 12), 6, y + Math.max(h, 10) / 2);
      });
      const step = NICE_STEPS.find((s) => s * plotW / (v1 - v0) >= 95) || NICE_STEPS.at(-1);
      ctx.fillStyle = "#667085";
      ctx.strokeStyle = "#e3e7ee";
      ctx.textBaseline = "middle";
      ctx.beginPath();
      for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
        const x = Math.round(xOf(t)) + 0.5;
        ctx.moveTo(x, AXIS_H - 4); ctx.lineTo(x, lay.height);
        ctx.fillText(clock(this.state.base_ms, t, step < 1e6), x + 3, AXIS_H / 2);
      }
      ctx.stroke();
    }

    drawBars(ctx, lay, v0, v1, xOf) {
      const names = this.state.names;
      const buckets = new Map();
      const failed = [];
      const labels = [];
      const h = Math.max(1, lay.laneH - (lay.laneH >= 6 ? 1 : 0));
      for (const { g, y } of lay.rows) {
        g.lanes.forEach((lane, k) => {
          const top = y + k * lay.laneH;
          let lastX = -Infinity;
          for (let i = firstEndingAfter(lane, v0); i < lane.length && lane[i].s <= v1; i++) {
            const r = lane[i];
            let x0 = xOf(r.s);
            let x1 = Math.max(xOf(r.e), x0 + 1);
            if (x1 <= lastX) continue;  // its pixel is painted already: 100,000 rows zoomed out
            if (x0 < lastX) x0 = lastX;
            let b = buckets.get(r.f);
            if (!b) { b = []; buckets.set(r.f, b); }
            b.push(x0, top, x1 - x0, h);
            if (r.x) failed.push(x0, top, x1 - x0, h);
            if (h >= 11 && x1 - x0 > 48) labels.push(x0, top, x1 - x0, r.f);
            lastX = x1;
          }
        });
      }
      for (const [f, b] of buckets) {
        ctx.fillStyle = colorOf(names[f] || "?");
        ctx.beginPath();
        for (let i = 0; i < b.length; i += 4) ctx.rect(b[i], b[i + 1], b[i + 2], b[i + 3]);
        ctx.fill();
      }
      if (failed.length) {
        ctx.strokeStyle = "#d00000";
        ctx.lineWidth = h >= 6 ? 2 : 1;
        ctx.fillStyle = "rgba(208, 0, 0, 0.55)";
        ctx.beginPath();
        for (let i = 0; i < failed.length; i += 4) {
          ctx.rect(failed[i] + 0.5, failed[i + 1] + 0.5, Math.max(1, failed[i + 2] - 1), Math.max(1, failed[i + 3] - 1));
        }
        if (h < 6) ctx.fill(); else ctx.stroke();
        ctx.lineWidth = 1;
      }
      ctx.fillStyle = "#fff";
      ctx.font = "11px system-ui, sans-serif";
      for (let i = 0; i < labels.length; i += 4) {
        ctx.fillText(this.fit(ctx, names[labels[i + 3]] || "?", labels[i + 2] - 8), labels[i] + 4, labels[i + 1] + h / 2);
      }
    }

    drawRunning(ctx, lay, xOf) {
      // Tasks running now are not rows yet (a row is a finished task): drawn open-ended,
      // pale, in the first lane free at their start.
      const now = this.now();
      const nowX = xOf(now);
      const h = Math.max(1, lay.laneH - (lay.laneH >= 6 ? 1 : 0));
      ctx.globalAlpha = 0.45;
      for (const { g, y, n } of lay.rows) {
        const used = new Set();
        for (const task of g.running || []) {
          const start = this.state.now_us - task.running_s * 1e6;
          let k = 0;
          while (k < n && (used.has(k) || (g.lanes[k] && g.lanes[k].length && g.lanes[k].at(-1).e > start))) k++;
          if (k >= n) continue;
          used.add(k);
          ctx.fillStyle = colorOf(task.name || "?");
          ctx.fillRect(xOf(start), y + k * lay.laneH, Math.max(1, nowX - xOf(start)), h);
        }
      }
      ctx.globalAlpha = 1;
    }

    fit(ctx, text, room) {
      if (ctx.measureText(text).width <= room) return text;
      let lo = 0, hi = text.length;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (ctx.measureText(text.slice(0, mid) + "…").width <= room) lo = mid; else hi = mid - 1;
      }
      return lo > 0 ? text.slice(0, lo) + "…" : "";
    }

    // The row under (x, y) in CSS pixels, with its group; null if none.
    hit(x, y) {
      if (!this.lay || !this.state || x < LABEL_W) return null;
      const { rows, laneH } = this.lay;
      const at = rows.find((r) => y >= r.y && y < r.y + r.n * laneH);
      if (!at) return null;
      const lane = at.g.lanes[Math.floor((y - at.y) / laneH)];
      if (!lane) return null;
      const [v0, v1] = this.view();
      const perPx = (v1 - v0) / (this.width - LABEL_W - 8);
      const t = v0 + (x - LABEL_W) * perPx;
      const i = firstEndingAfter(lane, t - 2 * perPx);
      const row = lane[i];
      return row && row.s <= t + 2 * perPx ? { row, group: at.g } : null;
    }

    describe(found) {
      const { row, group } = found;
      const name = this.state.names[row.f] || "?";
      const lines = [
        [name, row.x ? "failed" : ""],
        ["worker", group.label],
        ["started", clock(this.state.base_ms, row.s, true)],
        ["ran", T.duration(row.e - row.s)],
        ["queued", row.q >= 0 ? T.duration(row.q) : "unknown"],
        ["dispatched → started", row.p >= 0 ? T.duration(row.p) : "unknown"],
        ["object", row.o],
      ];
      return lines;
    }
  }

  return { Gantt, colorOf, LABEL_W };
})();
