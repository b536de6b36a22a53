#!/usr/bin/python3
"""The doc checker's own rules (check_doc_commands.py), on made-up pages and outputs:
that it fails on a figure the output does not hold, in a quote or in the text, and
passes what it must (issue 34: every quoted number checked)."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_doc_commands as c  # noqa: E402


SCRATCH = tempfile.mkdtemp()


def page(text):
    """A markdown file holding `text` (removed with the scratch directory at exit)."""
    f = tempfile.NamedTemporaryFile("w", suffix=".md", dir=SCRATCH, delete=False, encoding="utf-8")
    f.write(text)
    f.close()
    return f.name


class QuoteTest(unittest.TestCase):
    def test_exact_figures_must_match_exactly(self):
        out = "epoch 2/2 done  train loss 1.9719  test accuracy 0.3613\n"
        self.assertEqual(c.quote_failures(["epoch 2/2 done  train loss 1.9719  test accuracy 0.3613"], out, False), [])
        bad = c.quote_failures(["epoch 2/2 done  train loss 1.9720  test accuracy 0.3613"], out, False)
        self.assertEqual(len(bad), 1)
        self.assertIn("1.9720 (output 1.9719)", bad[0])

    def test_host_figures_within_the_factor_either_way(self):
        out = "median step 200 ms\n"
        self.assertEqual(c.quote_failures(["median step 30 ms"], out, False), [])  # 6.7x
        self.assertEqual(c.quote_failures(["median step 1500 ms"], out, False), [])  # 7.5x
        self.assertEqual(len(c.quote_failures(["median step 1700 ms"], out, False)), 1)  # 8.5x
        self.assertEqual(len(c.quote_failures(["median step 20 ms"], out, False)), 1)  # 10x

    def test_host_figures_at_the_noise_floor_match_each_other(self):
        out = "replicate 0.02, reduce 0.30 ms\n"
        self.assertEqual(c.quote_failures(["replicate 0.22, reduce 0.30 ms"], out, True), [])
        self.assertEqual(len(c.quote_failures(["replicate 0.22, reduce 3.00 ms"], out, True)), 1)

    def test_blas_kernels_are_the_hosts(self):
        out = "host step 24.6 ms on 0.30 CPU, OpenBLAS Zen / target 12.2 ms\n"
        self.assertEqual(c.quote_failures(["host step 59.7 ms on 0.30 CPU, OpenBLAS Haswell / target 12.2 ms"],
                                          out, False), [])
        self.assertEqual(len(c.quote_failures(["host step 59.7 ms on 0.30 CPU / target 12.2 ms"], out, False)), 1)

    def test_a_line_the_output_lacks(self):
        bad = c.quote_failures(["effect shown: yes"], "effect shown: NO\n", False)
        self.assertEqual(len(bad), 1)


class ProseTest(unittest.TestCase):
    def test_figures_in_the_text_must_be_quoted_outputs(self):
        text = ("Section text.\n\n```console\n$ ringside x\nvisited 305 distinct samples, loss 1.9719, 3.84x\n```\n\n"
                "It visited 305 samples (loss 1.9719, 3.84x faster).\n")
        self.assertEqual(c.prose_figure_failures(page(text)), [])
        for stale in ("It visited 300 samples.", "The loss was 1.9720.", "It ran 3.85x faster.",
                      "It moved 4,309,324 bytes."):
            bad = c.prose_figure_failures(page(text + stale + "\n"))
            self.assertEqual(len(bad), 1, stale)
            self.assertIn("in none of the page's command outputs", bad[0])

    def test_what_is_not_a_quoted_figure(self):
        text = ("```console\n$ ringside x\nok\n```\n\n"
                "Run it with `--batch=2048` on [a node](../glossary.md#node-1234).\n"
                "Worked out: 4 x 553 MB = 2212 MB.\n"
                "Measured on 2026-11-28, with 2 ranks and 16 steps, 1.5 cores.\n"
                "| 1234 | a table row |\n")
        self.assertEqual(c.prose_figure_failures(page(text)), [])

    def test_declared_settings_are_exempt_on_their_page_only(self):
        text = "```console\n$ ringside x\nok\n```\n\nSteps of 2048 samples.<!-- settings: 2048 (the batch) -->\n"
        self.assertEqual(c.prose_figure_failures(page(text)), [])
        self.assertEqual(len(c.prose_figure_failures(page(text.replace("<!-- settings: 2048 (the batch) -->", "")))), 1)

    def test_a_figure_inside_a_longer_number_does_not_count(self):
        text = "```console\n$ ringside x\nmoved 43090 bytes, 12.345 ms\n```\n\nIt moved 4309 bytes in 2.34 ms.\n"
        self.assertEqual(len(c.prose_figure_failures(page(text))), 2)


if __name__ == "__main__":
    try:
        unittest.main()
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
