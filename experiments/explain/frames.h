// A step-by-step picture as a sequence of frames, written as one SVG (the frames
// stacked, each under its title) or one self-contained HTML page (one frame at a time,
// previous/next buttons and the arrow keys; no network, no external file). The
// explainers (ring_explainer.h, ps_explainer.h) lay their frames out; this file only
// draws and writes them.
#ifndef RINGSIDE_EXPERIMENTS_EXPLAIN_FRAMES_H_
#define RINGSIDE_EXPERIMENTS_EXPLAIN_FRAMES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ringside {

// Every frame is kFrameWidth x kFrameHeight user units; coordinates are in them.
inline constexpr double kFrameWidth = 960;
inline constexpr double kFrameHeight = 700;

// A node: a rounded box with a bold title and lines of monospace text under it.
struct FrameBox {
  std::string title;               // "rank 0", "shard 1".
  std::vector<std::string> lines;  // Drawn under the title, one text line each.
  double x = 0, y = 0;             // Top-left corner.
  double width = 160, height = 60;
  double line_height = 13;  // Of `lines`; their font is a little smaller.
  bool highlight = false;   // Drawn in the accent colour (the node this frame is about).
};

// A message from box `from` to box `to` (indices into Frame::boxes), drawn as an arrow
// between the boxes' edges, offset sideways so that the two directions between the
// same pair stay apart, with `label` at its middle.
struct FrameArrow {
  int from = 0;
  int to = 0;
  std::string label;
};

struct Frame {
  std::string title;                 // "reduce-scatter step 1 of 2".
  std::vector<std::string> caption;  // Lines under the title.
  std::vector<FrameBox> boxes;
  std::vector<FrameArrow> arrows;
};

// One <svg class="frame"> element of `frame` (XML, well-formed; text escaped).
std::string FrameSvg(const Frame& frame, int index, int count);

// The whole SVG document: every frame, stacked top to bottom.
std::string FramesSvgDocument(const std::vector<Frame>& frames, const std::string& title);

// The whole HTML page: every frame inline, one shown at a time; buttons and the
// left/right arrow keys step through them; "#N" in the address opens frame N
// (1-based). The element id="status" reads "frame N of M" once its script ran.
std::string FramesHtmlDocument(const std::vector<Frame>& frames, const std::string& title);

// Writes `frames` to `path`: an SVG document for a name ending ".svg", an HTML page for
// ".html". Another ending is InvalidArgument naming the accepted ones; a file that
// cannot be written is the error of WriteFileAtomically (experiments/sys/files.h).
absl::Status WriteFrames(const std::string& path, const std::vector<Frame>& frames,
                         const std::string& title);

// InvalidArgument unless `path` ends in ".svg" or ".html" (what WriteFrames accepts),
// to reject a bad --frames before any work.
absl::Status CheckFramesPath(const std::string& path);

}  // namespace ringside

#endif  // RINGSIDE_EXPERIMENTS_EXPLAIN_FRAMES_H_
