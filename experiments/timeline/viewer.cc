// The timeline's offline viewer page (merge.h's TimelineViewerHtml).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "experiments/timeline/merge.h"

namespace ringside {
namespace {

// The page's one script. It reads the inlined trace (readTrace), checks every flow's
// ends against the spans of their tracks (countFlows), lays out one row per thread
// track grouped by process in sort_index order (layout), and draws the window the
// reader chose (draw): a time axis in milliseconds since the trace's first span, the
// spans coloured by phase with their details on hover, and the flows as lines. The
// window is the whole run, one step (the step list, the arrows, or "#step=N" in the
// address) or a range dragged across the tracks. What it read goes into #summary's
// data attributes; every drawn span carries data-name, data-phase, data-track,
// data-step, data-start and data-end (ms since the trace's start), so a headless
// browser's DOM dump shows what was drawn where.
constexpr char kScript[] = R"JS(
(function () {
  'use strict';
  const summary = document.getElementById('summary');
  const info = document.getElementById('info');
  let errors = 0;
  window.addEventListener('error', () => { summary.dataset.errors = String(++errors); });
  const NS = 'http://www.w3.org/2000/svg';
  const W = 1400, L = 220, H = 16, AXIS = 26;
  const key = (e) => e.pid + ':' + e.tid;
  // Phases by colour: a span's name picks one where it starts with it, else its category.
  const PHASES = [['forward', '#6fa8dc'], ['backward', '#1f4e8c'], ['compute', '#4a90d9'],
                  ['all-reduce', '#e69138'], ['push-pull', '#b45f06'], ['push', '#e06666'],
                  ['pull', '#f1c232'], ['communication', '#c8a165'], ['wait', '#cc0000'],
                  ['data', '#93c47d'], ['update', '#8e7cc3'], ['other', '#999999']];
  const COLOR = new Map(PHASES);
  const NAMED = ['forward', 'backward', 'all-reduce', 'push-pull', 'push', 'pull'];
  const BY_CAT = {compute: 'compute', comm: 'communication', wait: 'wait', data: 'data', update: 'update'};
  function phaseOf(s) {
    const n = s.name || '';
    for (const p of NAMED) if (n === p || n.startsWith(p + ' ')) return p;
    return BY_CAT[s.cat] || 'other';
  }
  const stepOf = (s) => (s.args && typeof s.args.step === 'number' ? s.args.step : undefined);

  // The trace's processes, thread names, spans by track, flows by id, counter series.
  function readTrace(events) {
    const t = {procs: new Map(), threads: new Map(), spans: new Map(), flows: new Map(),
               counters: new Set()};
    for (const e of events) {
      if (e.ph === 'M' && e.name === 'process_name') {
        t.procs.set(e.pid, Object.assign(t.procs.get(e.pid) || {sort: e.pid}, {name: e.args.name}));
      } else if (e.ph === 'M' && e.name === 'process_sort_index') {
        t.procs.set(e.pid, Object.assign(t.procs.get(e.pid) || {}, {sort: e.args.sort_index}));
      } else if (e.ph === 'M' && e.name === 'thread_name') {
        t.threads.set(key(e), e.args.name);
      } else if (e.ph === 'X') {
        if (!t.spans.has(key(e))) t.spans.set(key(e), []);
        t.spans.get(key(e)).push(e);
      } else if (e.ph === 's' || e.ph === 'f') {
        if (!t.flows.has(e.id)) t.flows.set(e.id, {});
        t.flows.get(e.id)[e.ph] = e;
      } else if (e.ph === 'C') {
        for (const series of Object.keys(e.args)) t.counters.add(e.pid + ':' + e.name + ' ' + series);
      }
    }
    return t;
  }

  // Flows with both ends inside a span of their track (good), and the others.
  function countFlows(t) {
    const inside = (p) => (t.spans.get(key(p)) || []).some((s) => s.ts < p.ts && p.ts < s.ts + s.dur);
    let good = 0, dangling = 0;
    for (const f of t.flows.values()) {
      if (f.s && f.f && inside(f.s) && inside(f.f)) good++; else dangling++;
    }
    return {good, dangling};
  }

  // Rows (a header per process, then its thread tracks), the trace's extent [t0, t1] and
  // each step's extent, in microseconds.
  function layout(t) {
    const rows = [], steps = new Map();
    const pids = [...t.procs.keys()].sort((a, b) => t.procs.get(a).sort - t.procs.get(b).sort);
    let t0 = Infinity, t1 = -Infinity, tracks = 0;
    for (const pid of pids) {
      rows.push({label: t.procs.get(pid).name, header: true});
      const tids = [...t.spans.keys()].filter((k) => k.split(':')[0] === String(pid))
          .map((k) => Number(k.split(':')[1])).sort((a, b) => a - b);
      for (const tid of tids) {
        const track = pid + ':' + tid;
        rows.push({label: t.threads.get(track) || ('thread ' + tid), track: track});
        tracks++;
        for (const s of t.spans.get(track)) {
          t0 = Math.min(t0, s.ts);
          t1 = Math.max(t1, s.ts + s.dur);
          const k = stepOf(s);
          if (k === undefined) continue;
          const e = steps.get(k) || [Infinity, -Infinity];
          steps.set(k, [Math.min(e[0], s.ts), Math.max(e[1], s.ts + s.dur)]);
        }
      }
    }
    if (!isFinite(t0)) { t0 = 0; t1 = 0; }
    return {rows, pids, tracks, t0, t1, steps};
  }

  // A span's hover text: name, phase, times since the trace's start, its arguments.
  function describe(s, origin) {
    const ms = (us) => (us / 1000).toFixed(3);
    const args = Object.entries(s.args || {}).map(([k, v]) => k + ' ' + v).join(', ');
    return s.name + ' (' + phaseOf(s) + '): ' + ms(s.ts - origin) + ' to ' + ms(s.ts + s.dur - origin) +
        ' ms, ' + ms(s.dur) + ' ms' + (args ? '; ' + args : '');
  }

  // Tick spacing for about n ticks over `span` microseconds: 1, 2 or 5 x 10^k.
  function tickStep(span, n) {
    const raw = Math.max(span, 1) / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= raw * 0.999);
  }

  // Draws the window view = {t0, t1, step} of the trace into #view; zoomed to a step, the
  // other steps' spans at its edges are drawn faded (data-context="1"). Returns the svg,
  // the spans drawn and the time at an x.
  function draw(t, lay, view) {
    const root = document.getElementById('view');
    root.textContent = '';
    const svg = document.createElementNS(NS, 'svg');
    const width = W - L, span = Math.max(1, view.t1 - view.t0);
    const x = (ts) => Math.min(W, Math.max(L, L + (ts - view.t0) / span * width));
    svg.setAttribute('width', W);
    svg.setAttribute('height', AXIS + lay.rows.length * H + 4);
    const add = (tag, attrs, text, parent) => {
      const el = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) if (v !== undefined) el.setAttribute(k, v);
      if (text !== undefined) el.textContent = text;
      (parent || svg).appendChild(el);
      return el;
    };
    // The time axis: milliseconds since the trace's first span.
    const dt = tickStep(span, 10), digits = Math.max(0, -Math.floor(Math.log10(dt / 1000) + 1e-9));
    const bottom = AXIS + lay.rows.length * H;
    for (let v = Math.ceil((view.t0 - lay.t0) / dt) * dt; lay.t0 + v <= view.t1; v += dt) {
      const px = x(lay.t0 + v);
      add('line', {x1: px, x2: px, y1: AXIS - 6, y2: bottom, stroke: '#e4e4e4', class: 'tick'});
      if (px > W - 50) continue;  // No room for the label.
      add('text', {x: px + 2, y: AXIS - 10, 'font-size': 10, class: 'tick-label'},
          (v / 1000).toFixed(digits) + ' ms');
    }
    let drawn = 0;
    const rowOf = new Map();
    lay.rows.forEach((r, i) => {
      const y = AXIS + i * H;
      add('text', {x: r.header ? 2 : 14, y: y + 12, 'font-size': 11,
                   'font-weight': r.header ? 'bold' : 'normal'}, r.label);
      if (!r.track) return;
      rowOf.set(r.track, i);
      for (const s of t.spans.get(r.track)) {
        if (s.ts + s.dur < view.t0 || s.ts > view.t1 || drawn >= 100000) continue;
        const phase = phaseOf(s), k = stepOf(s);
        const context = view.step !== null && k !== undefined && k !== view.step;
        const rect = add('rect', {
          x: x(s.ts), y: y + 2, width: Math.max(0.5, x(s.ts + s.dur) - x(s.ts)), height: H - 4,
          fill: COLOR.get(phase), 'data-name': s.name, 'data-phase': phase, 'data-track': r.track,
          opacity: context ? 0.3 : undefined, 'data-context': context ? '1' : undefined,
          'data-step': k, 'data-start': ((s.ts - lay.t0) / 1000).toFixed(3),
          'data-end': ((s.ts + s.dur - lay.t0) / 1000).toFixed(3)});
        add('title', {}, describe(s, lay.t0), rect);
        drawn++;
      }
    });
    const seen = (p) => rowOf.has(key(p)) && p.ts >= view.t0 && p.ts <= view.t1;
    for (const f of t.flows.values()) {
      if (!(f.s && f.f && seen(f.s) && seen(f.f))) continue;
      add('line', {x1: x(f.s.ts), y1: AXIS + rowOf.get(key(f.s)) * H + H / 2, x2: x(f.f.ts),
                   y2: AXIS + rowOf.get(key(f.f)) * H + H / 2, stroke: '#222', 'stroke-width': 0.7,
                   class: 'flow'});
    }
    svg.addEventListener('mouseover', (ev) => {
      if (ev.target.tagName === 'rect' && ev.target.firstChild) info.textContent = ev.target.firstChild.textContent;
    });
    root.appendChild(svg);
    return {svg, drawn, toTime: (px) => view.t0 + (px - L) / width * span};
  }

  // The controls: the step list, the arrows, "whole run", dragging a range, "#step=N".
  function start(t, lay, flows) {
    const select = document.getElementById('step');
    const steps = [...lay.steps.keys()].sort((a, b) => a - b);
    select.appendChild(new Option('whole run', 'all'));
    for (const k of steps) select.appendChild(new Option('step ' + k, String(k)));
    const legend = document.getElementById('legend');
    const used = new Set([...t.spans.values()].flat().map(phaseOf));
    legend.innerHTML = PHASES.filter(([p]) => used.has(p)).map(([p, c]) =>
        '<span><i style="background:' + c + '"></i>' + p + '</span>').join(' ');
    let current = null;
    const show = (step, t0, t1) => {
      const d = draw(t, lay, {t0: t0, t1: t1, step: step});
      current = {step: step, d: d};
      select.value = step === null ? 'all' : String(step);
      Object.assign(summary.dataset, {drawn: d.drawn, zoom: step === null ? 'all' : String(step),
                                      window: ((t0 - lay.t0) / 1000).toFixed(3) + '-' +
                                              ((t1 - lay.t0) / 1000).toFixed(3)});
      let down = null;
      d.svg.addEventListener('mousedown', (ev) => { down = ev.clientX - d.svg.getBoundingClientRect().left; });
      d.svg.addEventListener('mouseup', (ev) => {
        const up = ev.clientX - d.svg.getBoundingClientRect().left;
        if (down !== null && Math.abs(up - down) > 4 && Math.max(up, down) > L) {
          show(null, d.toTime(Math.max(L, Math.min(up, down))), d.toTime(Math.max(up, down)));
        }
        down = null;
      });
    };
    const showStep = (k) => {
      const e = lay.steps.get(k);
      if (!e) return show(null, lay.t0, lay.t1);
      const pad = (e[1] - e[0]) * 0.02;
      show(k, e[0] - pad, e[1] + pad);
    };
    const go = (delta) => {
      const i = steps.indexOf(current.step);
      const j = i < 0 ? (delta > 0 ? 0 : steps.length - 1) : i + delta;
      if (j >= 0 && j < steps.length) showStep(steps[j]);
    };
    select.addEventListener('change', () => (select.value === 'all' ? show(null, lay.t0, lay.t1)
                                                                      : showStep(Number(select.value))));
    document.getElementById('prev').addEventListener('click', () => go(-1));
    document.getElementById('next').addEventListener('click', () => go(1));
    document.getElementById('all').addEventListener('click', () => show(null, lay.t0, lay.t1));
    const m = /step=(\d+)/.exec(location.hash);
    if (m && lay.steps.has(Number(m[1]))) showStep(Number(m[1])); else show(null, lay.t0, lay.t1);
  }

  const t = readTrace(JSON.parse(document.getElementById('trace').textContent).traceEvents);
  const flows = countFlows(t);
  const lay = layout(t);
  Object.assign(summary.dataset, {processes: lay.pids.length, threads: lay.tracks,
                                  spans: [...t.spans.values()].reduce((n, l) => n + l.length, 0),
                                  flows: flows.good, dangling: flows.dangling, counters: t.counters.size,
                                  steps: lay.steps.size, errors: errors});
  start(t, lay, flows);
  summary.textContent = lay.pids.length + ' processes, ' + lay.tracks + ' thread tracks, ' +
      summary.dataset.spans + ' spans, ' + flows.good + ' flows (' + flows.dangling +
      ' without both ends), ' + t.counters.size + ' counter tracks, ' + lay.steps.size + ' steps';
})();
)JS";

constexpr char kStyle[] =
    "body{font-family:sans-serif;margin:12px}pre{background:#f4f4f4;padding:6px}"
    "#legend span{margin-right:12px;font-size:12px}"
    "#legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}"
    "#controls{margin:6px 0}#info{min-height:1.2em}svg{user-select:none}";

}  // namespace

std::string TimelineViewerHtml(const MergedTimeline& merged, const std::string& title) {
  // Inside <script>, only "</" could end the element early; "<\/" is the same JSON.
  const std::string data = absl::StrReplaceAll(merged.json, {{"</", "<\\/"}});
  const std::string safe_title =
      absl::StrReplaceAll(title, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
  return absl::StrCat(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>timeline: ", safe_title,
      "</title>\n<style>", kStyle, "</style></head>\n<body>\n<h1>Timeline of ", safe_title,
      "</h1>\n",
      "<p>Every process of the run, one row per thread: spans coloured by phase (hover for "
      "a span's times and arguments) and flows as lines (a bucket ready to its all-reduce, "
      "a push to its aggregate to its pull). Pick a step, or drag across the tracks, to "
      "zoom; times are milliseconds since the trace's first span. The same trace opens in "
      "<a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a> (timeline.json).</p>\n",
      "<div id=\"controls\"><select id=\"step\"></select> <button id=\"prev\">&larr; step</button> "
      "<button id=\"next\">step &rarr;</button> <button id=\"all\">whole run</button></div>\n",
      "<div id=\"legend\"></div>\n<pre id=\"info\">hover over a span</pre>\n",
      "<pre id=\"summary\" data-errors=\"0\">not read yet</pre>\n<div id=\"view\"></div>\n",
      "<script type=\"application/json\" id=\"trace\">", data, "</script>\n<script>", kScript,
      "</script>\n</body></html>\n");
}

}  // namespace ringside
