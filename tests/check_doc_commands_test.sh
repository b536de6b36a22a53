#!/usr/bin/env bash
# Runs check_doc_commands_test.py: the doc checker's own rules on made-up pages.
set -euo pipefail
exec /usr/bin/python3 "$1"
