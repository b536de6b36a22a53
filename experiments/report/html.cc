#include "experiments/report/html.h"

#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "experiments/report/markdown.h"
#include "experiments/sys/files.h"

extern "C" {
#include "cmark-gfm-core-extensions.h"
#include "cmark-gfm-extension_api.h"
#include "cmark-gfm.h"
}

namespace ringside {
namespace {

constexpr char kHead[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ringside report</title>\n"
    "<style>body{font-family:sans-serif;max-width:1400px;margin:2em auto;padding:0 1em}"
    "table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
    "th{background:#f0f0f0}.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:12px}"
    ".plot svg{width:100%;height:auto}pre{background:#f6f6f6;padding:8px}</style></head><body>\n";

// After layout, each plot records its rendered size in data-rendered (checked by
// tests/report_html_test.sh through headless Chromium's DOM dump).
constexpr char kSizeScript[] =
    "<script>window.addEventListener('load', function () {\n"
    "  document.querySelectorAll('.plot').forEach(function (plot) {\n"
    "    var box = plot.querySelector('svg').getBoundingClientRect();\n"
    "    plot.setAttribute('data-rendered', Math.round(box.width) + 'x' + Math.round(box.height));\n"
    "  });\n});</script>\n";

struct ParserDeleter {
  void operator()(cmark_parser* p) const { cmark_parser_free(p); }
};
struct NodeDeleter {
  void operator()(cmark_node* n) const { cmark_node_free(n); }
};

// The plot's name if `node` is an image of kPlotDir/NAME.svg, else "".
std::string PlotName(cmark_node* node) {
  if (cmark_node_get_type(node) != CMARK_NODE_IMAGE) return "";
  absl::string_view url = cmark_node_get_url(node);
  if (!absl::ConsumePrefix(&url, absl::StrCat(kPlotDir, "/")) || !absl::ConsumeSuffix(&url, ".svg")) return "";
  return std::string(url);
}

// A paragraph of plot images only (soft breaks between them) becomes one block of
// inline SVGs laid out side by side. Internal if an SVG cannot be read.
absl::Status InlinePlots(cmark_node* doc, const std::string& plot_dir) {
  std::vector<cmark_node*> paragraphs;
  for (cmark_node* n = cmark_node_first_child(doc); n != nullptr; n = cmark_node_next(n)) {
    if (cmark_node_get_type(n) != CMARK_NODE_PARAGRAPH) continue;
    bool plots_only = cmark_node_first_child(n) != nullptr;
    for (cmark_node* c = cmark_node_first_child(n); c != nullptr; c = cmark_node_next(c)) {
      const cmark_node_type t = cmark_node_get_type(c);
      plots_only &= t == CMARK_NODE_SOFTBREAK || !PlotName(c).empty();
    }
    if (plots_only) paragraphs.push_back(n);
  }
  for (cmark_node* paragraph : paragraphs) {
    std::string html = "<div class=\"plots\">\n";
    for (cmark_node* c = cmark_node_first_child(paragraph); c != nullptr; c = cmark_node_next(c)) {
      const std::string name = PlotName(c);
      if (name.empty()) continue;
      absl::StatusOr<std::string> svg = ReadFile(absl::StrCat(plot_dir, "/", name, ".svg"));
      if (!svg.ok()) return absl::InternalError(absl::StrCat("gnuplot wrote no ", name, ".svg"));
      std::string body = *svg;
      if (const size_t at = body.find("<svg"); at != std::string::npos) body = body.substr(at);
      absl::StrAppend(&html, "<div class=\"plot\" id=\"plot-", name, "\">", body, "</div>\n");
    }
    absl::StrAppend(&html, "</div>\n");
    cmark_node* block = cmark_node_new(CMARK_NODE_HTML_BLOCK);
    cmark_node_set_literal(block, html.c_str());
    cmark_node_replace(paragraph, block);
    cmark_node_free(paragraph);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReportHtml(const std::string& markdown, const std::string& plot_dir) {
  cmark_gfm_core_extensions_ensure_registered();
  std::unique_ptr<cmark_parser, ParserDeleter> parser(cmark_parser_new(CMARK_OPT_DEFAULT));
  cmark_syntax_extension* table = cmark_find_syntax_extension("table");
  if (table == nullptr) return absl::InternalError("cmark-gfm has no table extension");
  cmark_parser_attach_syntax_extension(parser.get(), table);
  cmark_parser_feed(parser.get(), markdown.data(), markdown.size());
  std::unique_ptr<cmark_node, NodeDeleter> doc(cmark_parser_finish(parser.get()));
  if (absl::Status s = InlinePlots(doc.get(), plot_dir); !s.ok()) return s;
  // UNSAFE: keep the raw HTML blocks of the plots (the Markdown is ours, not a user's).
  char* body = cmark_render_html(doc.get(), CMARK_OPT_UNSAFE, cmark_parser_get_syntax_extensions(parser.get()));
  std::string html = absl::StrCat(kHead, body, kSizeScript, "</body></html>\n");
  free(body);
  return html;
}

}  // namespace ringside
