#!/usr/bin/env bash
# Builds the guide and checks it: every mdBook under docs/guide/*/ (one per language, each
# with a book.toml), as scripts/test.sh does on CI.
#   1. copies the pictures, docs/img/*.svg, into each book's src/img/ (git-ignored);
#   2. checks the Markdown: every relative link and image in the books, the README(s) and
#      docs/ points to a file that exists (and, into a chapter, to a heading that exists);
#      every chapter is listed in its book's SUMMARY.md; and every book has the same chapter
#      files as the others, in the same order, so no chapter exists in one language only;
#   3. runs `mdbook build` for each book (into docs/guide/<lang>/book/, git-ignored).
# mdbook: $MDBOOK, else .deps/tools/bin/mdbook (scripts/test.sh installs it there), else PATH.
#   scripts/guide.sh            all of the above
#   scripts/guide.sh --check    steps 1 and 2 only (no mdbook needed)
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
for arg in "$@"; do
  case "$arg" in
    --check) build=0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "scripts/guide.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

books=()
for toml in docs/guide/*/book.toml; do
  [[ -e $toml ]] && books+=("$(dirname "$toml")")
done
if [[ ${#books[@]} == 0 ]]; then
  echo "scripts/guide.sh: no book under docs/guide/*/ (each needs a book.toml)" >&2
  exit 1
fi

for book in "${books[@]}"; do
  rm -rf "$book/src/img"
  mkdir -p "$book/src/img"
  cp docs/img/*.svg "$book/src/img/"
done

python3 - "${books[@]}" <<'PY'
"""Relative links and images, SUMMARY coverage, and chapter parity (files and order) between the books."""
import os
import re
import sys

books = sys.argv[1:]
errors = []

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
# [text](target "title") and ![alt](target): the target up to a space or the closing ')'.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_REF = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)=\"([^\"]+)\"", re.I)
INCLUDE = re.compile(r"\{\{#include\s+([^}\s:]+)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def lines_outside_code(path):
    """(line number, text) of each line outside fenced code, inline code removed."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, INLINE_CODE.sub("", line)


def slug(heading):
    """The id mdBook gives a heading: lower case, spaces to '-', other punctuation dropped."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"[`*_]", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    out = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def anchors(path):
    ids, seen = set(), {}
    for _, line in lines_outside_code(path):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            ids.add(base if n == 0 else f"{base}-{n}")
    return ids


def targets(path):
    for number, line in lines_outside_code(path):
        for pattern in (INLINE_LINK, HTML_REF, INCLUDE):
            for m in pattern.finditer(line):
                yield number, m.group(1)
        m = REF_DEF.match(line)
        if m:
            yield number, m.group(1)


def check_links(path):
    for number, target in targets(path):
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # an external address (https:, mailto:) is not checked here
        where = f"{path}:{number}"
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(resolved):
            errors.append(f"{where}: broken link or image: {target} ({resolved} does not exist)")
        elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            errors.append(f"{where}: no heading '#{anchor}' in {resolved}")


def chapters(book):
    src = os.path.join(book, "src")
    found = set()
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if os.path.join(root, d) != os.path.join(src, "img")]
        for name in files:
            if name.endswith(".md"):
                found.add(os.path.relpath(os.path.join(root, name), src))
    return found


markdown = []
for book in books:
    found = chapters(book)
    markdown += [os.path.join(book, "src", c) for c in sorted(found)]
    summary = os.path.join(book, "src", "SUMMARY.md")
    if "SUMMARY.md" not in found:
        errors.append(f"{book}: no src/SUMMARY.md")
        continue
    listed = {os.path.normpath(t.partition("#")[0]) for _, t in targets(summary) if t}
    for c in sorted(found - listed - {"SUMMARY.md"}):
        errors.append(f"{book}/src/{c}: not listed in {summary}")

# The files outside the books that link into the repository.
for extra in ["README.md", "README.zh-CN.md", "docs/guide/README.md"]:
    if os.path.exists(extra):
        markdown.append(extra)
for root, dirs, files in os.walk("docs"):
    if root.startswith(os.path.join("docs", "guide")):
        continue
    markdown += [os.path.join(root, f) for f in sorted(files) if f.endswith(".md")]

for path in markdown:
    check_links(path)

# Parity: a chapter file in one book must be in every other book.
lists = {book: chapters(book) for book in books}
everything = set().union(*lists.values())
for book, found in lists.items():
    for c in sorted(everything - found):
        others = [b for b, f in lists.items() if c in f]
        errors.append(f"{book}/src/{c}: missing (it exists in {', '.join(others)}): keep the languages in step")

# Order: every book's SUMMARY lists its chapters in the same order, so a chapter number or a
# "the next chapter" means the same in every language.
orders = {}
for book in books:
    summary = os.path.join(book, "src", "SUMMARY.md")
    if os.path.exists(summary):
        orders[book] = [os.path.normpath(t.partition("#")[0]) for _, t in targets(summary) if t]
first = next(iter(orders), None)
for book, order in orders.items():
    if order != orders[first]:
        at = next((i for i, (a, b) in enumerate(zip(order, orders[first])) if a != b), min(len(order), len(orders[first])))
        errors.append(f"{book}/src/SUMMARY.md: chapter {at + 1} is {order[at] if at < len(order) else 'missing'}, "
                      f"in {first} it is {orders[first][at] if at < len(orders[first]) else 'missing'}: keep the chapter order the same")

for e in errors:
    print(f"guide: {e}", file=sys.stderr)
if errors:
    print(f"guide: {len(errors)} problem(s) in {len(markdown)} Markdown files", file=sys.stderr)
    sys.exit(1)
print(f"guide: {len(markdown)} Markdown files, links and images intact; "
      f"{len(books)} book(s) with the same {len(everything)} chapter files: {', '.join(books)}")
PY

[[ $build == 1 ]] || exit 0
mdbook=${MDBOOK:-}
if [[ -z $mdbook ]]; then
  if [[ -x .deps/tools/bin/mdbook ]]; then mdbook=.deps/tools/bin/mdbook
  elif command -v mdbook >/dev/null; then mdbook=mdbook
  else
    echo "scripts/guide.sh: mdbook not found (scripts/test.sh installs it into .deps/tools; or set MDBOOK)" >&2
    exit 1
  fi
fi
for book in "${books[@]}"; do
  "$mdbook" build "$book"
done
echo "guide: built ${books[*]} with $("$mdbook" --version)"
