#!/usr/bin/env bash
# Every command the tutorials (docs/tutorial.md, docs/tutorial.zh.md) and the labs
# (docs/labs/) show is listed in docs/checked_commands.txt with its key output; this
# runs the ones of one part (argument 2: tutorial or labs) and checks them, and checks
# that the English and Chinese tutorials have the same sections and commands
# (check_doc_commands.py says how).
set -uo pipefail
RINGSIDE="$1"; PART="$2"; CHECK="$3"
DOCS=$(dirname "$(readlink -f "$4")")
exec /usr/bin/python3 "$CHECK" "$RINGSIDE" "$DOCS/checked_commands.txt" --only="$PART" \
  "$DOCS/tutorial.md" "$DOCS/tutorial.zh.md" "$DOCS"/labs/*.md
