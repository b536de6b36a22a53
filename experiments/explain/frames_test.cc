#include "experiments/explain/frames.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/explain/ps_explainer.h"
#include "experiments/explain/ring_explainer.h"
#include "gtest/gtest.h"

namespace ringside {
namespace {

// A small XML well-formedness check: tags nest and close, attribute values are quoted,
// text and attributes hold no raw '<' and only known entities. Returns "" or the
// problem.
std::string XmlProblem(const std::string& xml) {
  std::vector<std::string> open;
  size_t i = 0;
  auto entity_ok = [&](size_t at) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#"}) {
      if (xml.compare(at, strlen(e), e) == 0) return true;
    }
    return false;
  };
  while (i < xml.size()) {
    if (xml[i] == '&') {
      if (!entity_ok(i)) return "bad entity at " + std::to_string(i);
      ++i;
      continue;
    }
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    if (xml.compare(i, 5, "<?xml") == 0) {
      const size_t end = xml.find("?>", i);
      if (end == std::string::npos) return "unclosed <?xml";
      i = end + 2;
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return "unclosed tag at " + std::to_string(i);
    std::string tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "unexpected </" + name + ">";
      open.pop_back();
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    const size_t space = tag.find_first_of(" \n");
    const std::string name = tag.substr(0, space);
    if (name.empty()) return "empty tag name";
    // Attributes: name="value" pairs, values without '<'.
    std::string rest = space == std::string::npos ? "" : tag.substr(space);
    size_t k = 0;
    while (k < rest.size()) {
      if (rest[k] == ' ' || rest[k] == '\n') {
        ++k;
        continue;
      }
      const size_t eq = rest.find('=', k);
      if (eq == std::string::npos || eq + 1 >= rest.size() || rest[eq + 1] != '"') {
        return "unquoted attribute in <" + name + ">";
      }
      const size_t close = rest.find('"', eq + 2);
      if (close == std::string::npos) return "unterminated attribute in <" + name + ">";
      const std::string value = rest.substr(eq + 2, close - eq - 2);
      if (value.find('<') != std::string::npos) return "'<' in an attribute of <" + name + ">";
      k = close + 1;
    }
    if (!self_closing) open.push_back(name);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return "";
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(FramesTest, CheckerCatchesBrokenXml) {
  EXPECT_EQ(XmlProblem("<a><b x=\"1\"/>t &amp; u</a>"), "");
  EXPECT_NE(XmlProblem("<a><b></a>"), "");
  EXPECT_NE(XmlProblem("<a>x & y</a>"), "");
  EXPECT_NE(XmlProblem("<a x=1></a>"), "");
}

TEST(FramesTest, RingSvgIsWellFormedWithOneFramePerStep) {
  for (int w = 1; w <= 8; ++w) {
    const RingExplanation e = ExplainRing(RingInputs(w, 2 * w + 3, RingValues::kRandom, 3));
    const std::vector<Frame> frames = RingFrames(e);
    const std::string svg = FramesSvgDocument(frames, "ring <&> test");
    EXPECT_EQ(XmlProblem(svg), "") << "w=" << w;
    EXPECT_EQ(Count(svg, "class=\"frame\""), 2 * (w - 1) + 1) << "w=" << w;
    EXPECT_EQ(Count(svg, "class=\"arrow\""), w * 2 * (w - 1)) << "w=" << w;
    EXPECT_NE(svg.find("ring &lt;&amp;&gt; test"), std::string::npos);
  }
}

TEST(FramesTest, HtmlIsSelfContainedWithInlineFrames) {
  const RingExplanation e = ExplainRing(RingInputs(4, 11, RingValues::kReadable, 1));
  const std::vector<Frame> frames = RingFrames(e);
  const std::string html = FramesHtmlDocument(frames, "ring");
  EXPECT_EQ(Count(html, "<svg class=\"frame\""), 7);
  // Each inline SVG is well-formed on its own.
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    const size_t end = html.find("</svg>", at);
    ASSERT_NE(end, std::string::npos);
    EXPECT_EQ(XmlProblem(html.substr(at, end + 6 - at)), "");
  }
  // Nothing to fetch: no external scripts, styles, images or links.
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_NE(html.find("ArrowRight"), std::string::npos);
  EXPECT_NE(html.find("id=\"status\""), std::string::npos);
}

TEST(FramesTest, PsFramesAreWellFormed) {
  PsExplainOptions o;
  o.model = "mlp:784-256-256-10";
  o.workers = 4;
  o.shards = 2;
  absl::StatusOr<PsExplanation> e = ExplainPs(o);
  ASSERT_TRUE(e.ok()) << e.status();
  const std::string svg = FramesSvgDocument(PsFrames(*e), "ps");
  EXPECT_EQ(XmlProblem(svg), "");
  EXPECT_EQ(Count(svg, "class=\"frame\""), 5);
  EXPECT_EQ(Count(svg, "class=\"arrow\""), 2 * 4 * 2);  // Push and pull.
}

TEST(FramesTest, WriteFramesPicksTheFormatByExtension) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::vector<Frame> frames =
      RingFrames(ExplainRing(RingInputs(2, 3, RingValues::kReadable, 1)));
  ASSERT_TRUE(WriteFrames(dir + "/r.svg", frames, "r").ok());
  ASSERT_TRUE(WriteFrames(dir + "/r.html", frames, "r").ok());
  std::stringstream svg, html;
  svg << std::ifstream(dir + "/r.svg").rdbuf();
  html << std::ifstream(dir + "/r.html").rdbuf();
  EXPECT_EQ(svg.str().rfind("<?xml", 0), 0u);
  EXPECT_EQ(html.str().rfind("<!DOCTYPE html>", 0), 0u);
  const absl::Status bad = WriteFrames(dir + "/r.png", frames, "r");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find(".svg"), absl::string_view::npos);
  EXPECT_NE(bad.message().find(".html"), absl::string_view::npos);
  EXPECT_FALSE(CheckFramesPath("frames").ok());
}

}  // namespace
}  // namespace ringside
