#include "experiments/explain/frames.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/sys/files.h"

namespace ringside {
namespace {

constexpr double kTitleY = 30;
constexpr double kCaptionY = 54;
constexpr double kCaptionStep = 18;
constexpr double kBoxTitleHeight = 20;
// Sideways offset of an arrow from the line between box centres, so that A -> B and
// B -> A do not overlap.
constexpr double kArrowOffset = 9;

// Text for XML character data and attribute values.
std::string Escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

// Where the ray from a box's centre in direction (dx, dy) leaves the box.
void EdgePoint(const FrameBox& b, double dx, double dy, double* x, double* y) {
  const double cx = b.x + b.width / 2, cy = b.y + b.height / 2;
  const double tx = dx == 0 ? 1e30 : (b.width / 2) / std::fabs(dx);
  const double ty = dy == 0 ? 1e30 : (b.height / 2) / std::fabs(dy);
  const double t = std::min(tx, ty);
  *x = cx + dx * t;
  *y = cy + dy * t;
}

std::string Arrow(const FrameBox& from, const FrameBox& to, const std::string& label,
                  const std::string& head) {
  const double fx = from.x + from.width / 2, fy = from.y + from.height / 2;
  const double tx = to.x + to.width / 2, ty = to.y + to.height / 2;
  double dx = tx - fx, dy = ty - fy;
  const double len = std::hypot(dx, dy);
  if (len < 1) return "";
  dx /= len;
  dy /= len;
  // The right-hand side of the direction of travel.
  const double ox = -dy * kArrowOffset, oy = dx * kArrowOffset;
  double x1, y1, x2, y2;
  EdgePoint(from, dx, dy, &x1, &y1);
  EdgePoint(to, -dx, -dy, &x2, &y2);
  x1 += ox;
  y1 += oy;
  x2 += ox;
  y2 += oy;
  const double mx = (x1 + x2) / 2 + ox * 1.5, my = (y1 + y2) / 2 + oy * 1.5;
  // The label extends away from the arrow, on the side it is offset to.
  const char* anchor = ox > 3 ? "start" : ox < -3 ? "end" : "middle";
  return absl::StrCat(
      "<g class=\"arrow\"><line x1=\"", Num(x1), "\" y1=\"", Num(y1), "\" x2=\"", Num(x2),
      "\" y2=\"", Num(y2), "\" stroke=\"#c0392b\" stroke-width=\"2\" marker-end=\"url(#", head,
      ")\"/>", "<text x=\"", Num(mx), "\" y=\"", Num(my),
      "\" font-size=\"11\" font-family=\"monospace\" fill=\"#c0392b\" text-anchor=\"", anchor,
      "\" "
      "dominant-baseline=\"middle\" stroke=\"#ffffff\" stroke-width=\"3\" "
      "paint-order=\"stroke\">",
      Escape(label), "</text></g>\n");
}

std::string Box(const FrameBox& b) {
  std::string out = absl::StrCat(
      "<g class=\"box\"><rect x=\"", Num(b.x), "\" y=\"", Num(b.y), "\" width=\"", Num(b.width),
      "\" height=\"", Num(b.height), "\" rx=\"8\" fill=\"", b.highlight ? "#fdebd0" : "#eaf2f8",
      "\" stroke=\"", b.highlight ? "#ca6f1e" : "#2e86c1", "\" stroke-width=\"1.5\"/>",
      "<text x=\"", Num(b.x + 8), "\" y=\"", Num(b.y + 15),
      "\" font-size=\"13\" font-weight=\"bold\" font-family=\"sans-serif\">", Escape(b.title),
      "</text>");
  for (size_t i = 0; i < b.lines.size(); ++i) {
    absl::StrAppend(&out, "<text x=\"", Num(b.x + 6), "\" y=\"",
                    Num(b.y + kBoxTitleHeight + b.line_height * (i + 0.8)), "\" font-size=\"",
                    b.line_height < 12 ? "10" : "11",
                    "\" font-family=\"monospace\" xml:space=\"preserve\">", Escape(b.lines[i]),
                    "</text>");
  }
  absl::StrAppend(&out, "</g>\n");
  return out;
}

// The arrowhead, once per <svg> (ids are per document: the HTML page's frames each
// define it with their own id).
std::string Defs(const std::string& id) {
  return absl::StrCat(
      "<defs><marker id=\"", id,
      "\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
      "orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#c0392b\"/></marker></defs>\n");
}

// The frame's content, drawn at the origin; `head` is the arrowhead marker's id.
std::string FrameBody(const Frame& frame, int index, int count, const std::string& head) {
  std::string out = absl::StrCat(
      "<rect x=\"0\" y=\"0\" width=\"", Num(kFrameWidth), "\" height=\"", Num(kFrameHeight),
      "\" fill=\"#ffffff\" stroke=\"#cccccc\"/>\n", "<text x=\"20\" y=\"", Num(kTitleY),
      "\" font-size=\"20\" font-weight=\"bold\" font-family=\"sans-serif\">",
      Escape(absl::StrCat(index + 1, "/", count, "  ", frame.title)), "</text>\n");
  for (size_t i = 0; i < frame.caption.size(); ++i) {
    absl::StrAppend(&out, "<text x=\"20\" y=\"", Num(kCaptionY + kCaptionStep * i),
                    "\" font-size=\"14\" font-family=\"sans-serif\" fill=\"#444444\">",
                    Escape(frame.caption[i]), "</text>\n");
  }
  for (const FrameBox& b : frame.boxes) absl::StrAppend(&out, Box(b));
  for (const FrameArrow& a : frame.arrows) {
    if (a.from < 0 || a.to < 0 || a.from >= static_cast<int>(frame.boxes.size()) ||
        a.to >= static_cast<int>(frame.boxes.size())) {
      continue;
    }
    absl::StrAppend(&out, Arrow(frame.boxes[a.from], frame.boxes[a.to], a.label, head));
  }
  return out;
}

}  // namespace

std::string FrameSvg(const Frame& frame, int index, int count) {
  const std::string head = absl::StrCat("head", index);
  return absl::StrCat("<svg class=\"frame\" id=\"frame", index + 1,
                      "\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", Num(kFrameWidth),
                      " ", Num(kFrameHeight), "\" width=\"", Num(kFrameWidth), "\" height=\"",
                      Num(kFrameHeight), "\">\n", Defs(head), FrameBody(frame, index, count, head),
                      "</svg>\n");
}

std::string FramesSvgDocument(const std::vector<Frame>& frames, const std::string& title) {
  constexpr double kGap = 20;
  const int count = static_cast<int>(frames.size());
  const double height = count * (kFrameHeight + kGap);
  std::string out =
      absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 ", Num(kFrameWidth),
                   " ", Num(height), "\" width=\"", Num(kFrameWidth), "\" height=\"", Num(height),
                   "\">\n", "<title>", Escape(title), "</title>\n", Defs("head"));
  for (int i = 0; i < count; ++i) {
    absl::StrAppend(&out, "<g class=\"frame\" id=\"frame", i + 1, "\" transform=\"translate(0,",
                    Num(i * (kFrameHeight + kGap)), ")\">\n",
                    FrameBody(frames[i], i, count, "head"), "</g>\n");
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

std::string FramesHtmlDocument(const std::vector<Frame>& frames, const std::string& title) {
  const int count = static_cast<int>(frames.size());
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
      Escape(title),
      "</title>\n<style>\n"
      "body { font-family: sans-serif; margin: 16px; }\n"
      ".frame { display: none; max-width: 100%; height: auto; }\n"
      ".frame.shown { display: block; }\n"
      "#controls { margin: 8px 0; }\n"
      "button { font-size: 16px; margin-right: 8px; }\n"
      "</style>\n</head>\n<body>\n<h1>",
      Escape(title),
      "</h1>\n<div id=\"controls\"><button id=\"prev\" type=\"button\">&#8592; previous</button>"
      "<button id=\"next\" type=\"button\">next &#8594;</button>"
      "<span id=\"status\" data-frames=\"",
      count, "\">frame 1 of ", count,
      " (script not run)</span></div>\n<p>Keys: left and right arrow.</p>\n<div id=\"frames\">\n");
  for (int i = 0; i < count; ++i) absl::StrAppend(&out, FrameSvg(frames[i], i, count));
  absl::StrAppend(&out,
                  "</div>\n<script>\n"
                  "(function () {\n"
                  "  var frames = document.querySelectorAll('svg.frame');\n"
                  "  var status = document.getElementById('status');\n"
                  "  var current = 0;\n"
                  "  function show(i) {\n"
                  "    if (frames.length === 0) { status.textContent = 'no frames'; return; }\n"
                  "    current = Math.max(0, Math.min(frames.length - 1, i));\n"
                  "    for (var k = 0; k < frames.length; ++k) {\n"
                  "      frames[k].classList.toggle('shown', k === current);\n"
                  "    }\n"
                  "    status.textContent = 'frame ' + (current + 1) + ' of ' + frames.length;\n"
                  "    status.setAttribute('data-shown', String(current + 1));\n"
                  "  }\n"
                  "  document.getElementById('prev').addEventListener('click', function () { "
                  "show(current - 1); });\n"
                  "  document.getElementById('next').addEventListener('click', function () { "
                  "show(current + 1); });\n"
                  "  document.addEventListener('keydown', function (e) {\n"
                  "    if (e.key === 'ArrowLeft') { show(current - 1); e.preventDefault(); }\n"
                  "    if (e.key === 'ArrowRight') { show(current + 1); e.preventDefault(); }\n"
                  "  });\n"
                  "  var start = parseInt(window.location.hash.replace('#', ''), 10);\n"
                  "  show(isNaN(start) ? 0 : start - 1);\n"
                  "})();\n"
                  "</script>\n</body>\n</html>\n");
  return out;
}

absl::Status CheckFramesPath(const std::string& path) {
  if (absl::EndsWith(path, ".svg") || absl::EndsWith(path, ".html")) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--frames=", path,
                   ": the file name must end in .svg (all frames in one picture) or "
                   ".html (a page that steps through them)"));
}

absl::Status WriteFrames(const std::string& path, const std::vector<Frame>& frames,
                         const std::string& title) {
  if (absl::Status s = CheckFramesPath(path); !s.ok()) return s;
  return WriteFileAtomically(path, absl::EndsWith(path, ".svg")
                                       ? FramesSvgDocument(frames, title)
                                       : FramesHtmlDocument(frames, title));
}

}  // namespace ringside
