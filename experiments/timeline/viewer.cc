// The timeline's offline viewer page (merge.h's TimelineViewerHtml).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "experiments/timeline/merge.h"

namespace ringside {
namespace {

// Reads the inlined trace, checks every flow's ends against the spans of their tracks,
// draws one row per thread track (grouped by process, in sort_index order) with the
// spans as boxes and the flows as lines, and writes what it found into #summary.
// One immediately invoked JavaScript function of about 85 lines, kept whole: it is the
// page's only script and reads top to bottom as the page is drawn (issue 34 redraws it).
constexpr char kScript[] = R"JS(
(function () {
  const summary = document.getElementById('summary');
  let errors = 0;
  window.addEventListener('error', () => { summary.dataset.errors = String(++errors); });
  const events = JSON.parse(document.getElementById('trace').textContent).traceEvents;
  const procs = new Map(), threads = new Map(), spans = new Map();
  const flows = new Map(), counters = new Set();
  const key = (e) => e.pid + ':' + e.tid;
  for (const e of events) {
    if (e.ph === 'M' && e.name === 'process_name') {
      procs.set(e.pid, Object.assign(procs.get(e.pid) || {sort: e.pid}, {name: e.args.name}));
    } else if (e.ph === 'M' && e.name === 'process_sort_index') {
      procs.set(e.pid, Object.assign(procs.get(e.pid) || {}, {sort: e.args.sort_index}));
    } else if (e.ph === 'M' && e.name === 'thread_name') {
      threads.set(key(e), e.args.name);
    } else if (e.ph === 'X') {
      if (!spans.has(key(e))) spans.set(key(e), []);
      spans.get(key(e)).push(e);
    } else if (e.ph === 's' || e.ph === 'f') {
      if (!flows.has(e.id)) flows.set(e.id, {});
      flows.get(e.id)[e.ph] = e;
    } else if (e.ph === 'C') {
      for (const series of Object.keys(e.args)) counters.add(e.pid + ':' + e.name + ' ' + series);
    }
  }
  const inside = (p) => (spans.get(key(p)) || []).some((s) => s.ts < p.ts && p.ts < s.ts + s.dur);
  let good = 0, dangling = 0;
  for (const f of flows.values()) {
    if (f.s && f.f && inside(f.s) && inside(f.f)) good++; else dangling++;
  }
  // Rows: process headers, then their thread tracks.
  const rows = [];
  const pids = [...procs.keys()].sort((a, b) => procs.get(a).sort - procs.get(b).sort);
  let t0 = Infinity, t1 = -Infinity, drawnThreads = 0;
  for (const pid of pids) {
    rows.push({label: procs.get(pid).name, header: true});
    const tids = [...spans.keys()].filter((k) => k.split(':')[0] === String(pid))
        .map((k) => Number(k.split(':')[1])).sort((a, b) => a - b);
    for (const tid of tids) {
      rows.push({label: threads.get(pid + ':' + tid) || ('thread ' + tid), track: pid + ':' + tid});
      drawnThreads++;
      for (const s of spans.get(pid + ':' + tid)) { t0 = Math.min(t0, s.ts); t1 = Math.max(t1, s.ts + s.dur); }
    }
  }
  const W = 1400, L = 220, H = 16, width = W - L;
  const x = (t) => L + (t1 > t0 ? (t - t0) / (t1 - t0) * width : 0);
  const rowOf = new Map();
  rows.forEach((r, i) => { if (r.track) rowOf.set(r.track, i); });
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('width', W);
  svg.setAttribute('height', rows.length * H + 4);
  const colors = {compute: '#4a90d9', comm: '#e8a33d', wait: '#d9534f', data: '#8fbc8f', update: '#9b59b6'};
  const add = (tag, attrs, text) => {
    const el = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    svg.appendChild(el);
    return el;
  };
  let drawn = 0;
  rows.forEach((r, i) => {
    add('text', {x: r.header ? 2 : 14, y: i * H + 12, 'font-size': 11,
                 'font-weight': r.header ? 'bold' : 'normal'}, r.label);
    if (!r.track) return;
    for (const s of spans.get(r.track)) {
      if (drawn >= 100000) break;
      add('rect', {x: x(s.ts), y: i * H + 2, width: Math.max(0.5, x(s.ts + s.dur) - x(s.ts)),
                   height: H - 4, fill: colors[s.cat] || '#888'});
      drawn++;
    }
  });
  for (const f of flows.values()) {
    if (!(f.s && f.f) || !rowOf.has(key(f.s)) || !rowOf.has(key(f.f))) continue;
    add('line', {x1: x(f.s.ts), y1: rowOf.get(key(f.s)) * H + H / 2, x2: x(f.f.ts),
                 y2: rowOf.get(key(f.f)) * H + H / 2, stroke: '#222', 'stroke-width': 0.7});
  }
  document.getElementById('view').appendChild(svg);
  Object.assign(summary.dataset, {processes: pids.length, threads: drawnThreads,
                                  spans: [...spans.values()].reduce((n, l) => n + l.length, 0),
                                  flows: good, dangling: dangling, counters: counters.size,
                                  drawn: drawn, errors: errors});
  summary.textContent = pids.length + ' processes, ' + drawnThreads + ' thread tracks, ' +
      summary.dataset.spans + ' spans, ' + good + ' flows (' + dangling + ' without both ends), ' +
      counters.size + ' counter tracks';
})();
)JS";

}  // namespace

std::string TimelineViewerHtml(const MergedTimeline& merged, const std::string& title) {
  // Inside <script>, only "</" could end the element early; "<\/" is the same JSON.
  const std::string data = absl::StrReplaceAll(merged.json, {{"</", "<\\/"}});
  const std::string safe_title =
      absl::StrReplaceAll(title, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
  return absl::StrCat(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>timeline: ", safe_title,
      "</title>\n<style>body{font-family:sans-serif;margin:12px}pre{background:#f4f4f4;"
      "padding:6px}</style></head>\n<body>\n<h1>Timeline of ", safe_title, "</h1>\n",
      "<p>Every process of the run, one after another: spans (blue compute, orange "
      "communication, red wait, green data, purple update) and flows (lines). For zooming, "
      "open timeline.json in <a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a>.</p>\n",
      "<pre id=\"summary\" data-errors=\"0\">not read yet</pre>\n<div id=\"view\"></div>\n",
      "<script type=\"application/json\" id=\"trace\">", data, "</script>\n<script>", kScript,
      "</script>\n</body></html>\n");
}

}  // namespace ringside
