#!/usr/bin/env python3
"""Builds the English documentation corpus: plain prose from the manuals that
Debian 12's documentation packages install, for a byte-level BPE tokenizer
and FP8 training at GPU scale (bench/fp8_parity_gpu.sh).

Sources (Debian 12 package and version; MB of prose each contributes after
markup is stripped and paragraphs are deduplicated, from
`python3 scripts/make-en-corpus.py --out data/en-docs`, which prints this
table and writes it to OUT/sources.json; 2026-11-26):

  package               version                    files    MB
  linux-doc-6.1         6.1.192-2                   4624  16.9
  python3.11-doc        3.11.2-6+deb12u9             494   6.9
  perl-doc              5.36.0-7+deb12u4             205   5.7
  python-django-doc     3:3.2.25-0+deb12u7           256   2.6
  postgresql-doc-15     15.20-0+deb12u1             1142   4.6
  git-doc               1:2.39.5-0+deb12u3           242   1.2
  debian-handbook       11.20220922                  126   0.7
  qtbase5-doc-html      5.15.8+dfsg-11+deb12u3      1285   7.8
  octave-doc            7.3.0-2                     2852   1.7
  erlang-doc            1:25.2.3+dfsg-1+deb12u4      668   5.3
  rust-doc              1.63.0+dfsg1-2               652   2.0
  total                                                   55.5

That is 55.6 MB of train.jsonl and 0.8 MB of heldout.jsonl (sha256
a1c3d77bb7f1a58b..., b712bbc2bd015542...), 12.34M and 0.19M tokens with the
32768-token tokenizer of scripts/make-en-data.sh. The list of packages is
scripts/en-doc-packages.txt; their files are read in place.

Markup goes: reStructuredText (the kernel's Documentation sources, the
Python manual's _sources) loses directives, code and literal blocks, tables,
section rules and inline roles; POD (perlfaq, perlfunc, ...) loses commands,
verbatim blocks and formatting codes; HTML (Django, PostgreSQL, the Debian
Administrator's Handbook, Qt, Octave, Erlang/OTP, the Rust books) keeps the
text of paragraphs, list items, definitions and headings outside navigation,
code and tables; AsciiDoc (git's manual pages) loses listings, attributes
and inline markup. Paragraphs are unwrapped to one line; a paragraph is kept
when it is mostly letters and spaces, with at most 3% of its letters outside
ASCII (English prose, not code or a translation), and only its first
occurrence in the whole corpus is kept (license texts, repeated boilerplate,
the kernel's duplicated pages).

Each document (one source file) becomes records of consecutive paragraphs of
at most --record-bytes bytes, one {"text": ...} JSON line each, so that a
record fits a training row after tokenization instead of being cut off.
Every --heldout-every-th document (by its position in the sorted file list)
goes to heldout.jsonl, the rest to train.jsonl: the held-out text comes from
documents the model never trains on. Deterministic: sources in a fixed
order, files in byte order of their paths, so the same package versions give
the same files byte for byte (the SHA-256 of each is printed).

  scripts/make-en-corpus.py --out DIR [--root /] [--max-bytes-per-source N]
                            [--record-bytes 6000] [--heldout-every 50]

--root reads the packages' files under another directory (e.g. one that
`dpkg -x` unpacked them into); --max-bytes-per-source stops each source
after that many bytes of prose (a small slice, for tests). A source whose
directory is missing is an error naming the package to install.
"""

import argparse
import glob
import gzip
import hashlib
import html.parser
import json
import os
import re
import subprocess
import sys


# ---------------------------------------------------------------------------
# Inline markup

RST_ROLE = re.compile(r":[\w:+.-]+:`([^`]*)`")
RST_TARGET = re.compile(r"`([^`<]*?)\s*<[^>`]*>`_{1,2}")
RST_REF = re.compile(r"`([^`]+)`_{1,2}")
RST_LITERAL = re.compile(r"``([^`]*)``")
RST_INTERPRETED = re.compile(r"`([^`]*)`")
RST_STRONG = re.compile(r"\*\*([^*]+)\*\*")
RST_EMPHASIS = re.compile(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])")
RST_SUBSTITUTION = re.compile(r"\|([\w -]+)\|")
RST_FOOTNOTE = re.compile(r"\s*\[(?:#\w*|\*|\d+)\]_")
RST_WORD_REF = re.compile(r"\b(\w+)_\b(?!\w)")


def clean_rst_inline(text):
    # A role's text may name its target as "title <target>": keep the title.
    text = RST_ROLE.sub(lambda m: re.sub(r"\s*<[^>]*>$", "", m.group(1))
                        .lstrip("~!"), text)
    text = RST_TARGET.sub(r"\1", text)
    text = RST_REF.sub(r"\1", text)
    text = RST_LITERAL.sub(r"\1", text)
    text = RST_INTERPRETED.sub(r"\1", text)
    text = RST_STRONG.sub(r"\1", text)
    text = RST_EMPHASIS.sub(r"\1", text)
    text = RST_SUBSTITUTION.sub(r"\1", text)
    text = RST_FOOTNOTE.sub("", text)
    return RST_WORD_REF.sub(r"\1", text)


# ---------------------------------------------------------------------------
# reStructuredText

# Directives whose indented content is code, tables, includes or navigation;
# the content of all others (note, warning, function descriptions) is prose.
RST_SKIPPED_DIRECTIVES = {
    "code-block", "code", "sourcecode", "literalinclude", "highlight",
    "toctree", "image", "figure", "kernel-doc", "kernel-include",
    "kernel-abi", "kernel-feat", "include", "raw", "math", "productionlist",
    "doctest", "testcode", "testoutput", "testsetup", "testcleanup",
    "csv-table", "list-table", "table", "flat-table", "graphviz", "only",
    "index", "tabularcolumns", "parsed-literal", "cssclass", "contents",
    "sectnum", "moduleauthor", "sectionauthor", "autosummary", "digraph",
    "c:namespace", "c:namespace-push", "c:namespace-pop", "kernel-figure",
    "kernel-render", "literal", "rst-class", "role", "default-role",
    "program", "opcode", "pdbcommand", "availability", "impl-detail",
    "audit-event", "audit-event-table", "miscnews", "limited-api-list",
}
ADORNMENT = re.compile(r"^([=\-`:'\"~^_*+#<>.])\1{2,}\s*$")
DIRECTIVE = re.compile(r"^\.\.\s+([\w:.+-]+)::")


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def rst_to_paragraphs(text):
    lines = text.expandtabs(8).splitlines()
    paragraphs, current = [], []
    skip_deeper_than = None  # skip lines indented more than this

    def flush():
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for raw in lines:
        line = raw.rstrip()
        if not line.strip():
            flush()
            continue
        ind = indent_of(line)
        if skip_deeper_than is not None:
            if ind > skip_deeper_than:
                continue
            skip_deeper_than = None
        stripped = line.strip()
        directive = DIRECTIVE.match(stripped)
        if directive:
            flush()
            if directive.group(1) in RST_SKIPPED_DIRECTIVES:
                skip_deeper_than = ind
            continue
        if stripped.startswith(".. "):
            # A comment, a link target or a substitution definition, with
            # whatever is indented under it.
            flush()
            skip_deeper_than = ind
            continue
        if ADORNMENT.match(stripped) or stripped.startswith(("+-", "+=", "|")):
            flush()
            continue
        if stripped.startswith((">>>", "...", "$ ", "# ")) and current == []:
            continue
        if stripped.startswith(":") and stripped.count(":") >= 2:
            # A field list ":Author: X" or a directive option: keep the value.
            field = re.match(r"^:([^:]+):\s*(.*)$", stripped)
            if field:
                flush()
                if field.group(2):
                    current.append(clean_rst_inline(field.group(2)))
                continue
        literal_follows = stripped.endswith("::")
        if literal_follows:
            stripped = stripped[:-1] if not stripped.endswith(" ::") \
                else stripped[:-3]
        if stripped:
            current.append(clean_rst_inline(stripped))
        if literal_follows:
            flush()
            skip_deeper_than = ind
    flush()
    return paragraphs


# ---------------------------------------------------------------------------
# POD

POD_CODE = re.compile(r"([A-Z])<(?!<)([^<>]*)>")
POD_CODE_ANGLES = re.compile(r"([A-Z])<<+\s+(.*?)\s+>>+")
POD_ENTITIES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/",
                "quot": '"', "amp": "&", "apos": "'"}


def pod_code(kind, body):
    if kind == "E":
        return POD_ENTITIES.get(body, "")
    if kind in "XZ":
        return ""
    if kind == "L":
        body = body.split("|", 1)[0] if "|" in body else body
        return body.split("/", 1)[0].strip('"') or body.strip('"/')
    return body


def clean_pod_inline(text):
    for _ in range(8):
        new = POD_CODE_ANGLES.sub(lambda m: pod_code(m.group(1), m.group(2)),
                                  text)
        new = POD_CODE.sub(lambda m: pod_code(m.group(1), m.group(2)), new)
        if new == text:
            break
        text = new
    return text


def pod_to_paragraphs(text):
    paragraphs, in_begin = [], False
    for block in re.split(r"\n[ \t]*\n", text):
        if not block.strip():
            continue
        first = block.lstrip("\n")
        if first.startswith("="):
            command, _, rest = first.partition(" ")
            if command == "=begin":
                in_begin = True
            elif command == "=end":
                in_begin = False
            elif command.startswith("=head") or command == "=item":
                rest = " ".join(rest.split())
                if rest and rest not in ("*",) and not rest.isdigit():
                    paragraphs.append(clean_pod_inline(rest))
            continue
        if in_begin or first[:1] in (" ", "\t"):
            continue  # a =begin block, or a verbatim (code) paragraph
        paragraphs.append(clean_pod_inline(" ".join(block.split())))
    return paragraphs


# ---------------------------------------------------------------------------
# HTML

HTML_TEXT_BLOCKS = {"p", "li", "dd", "dt", "h1", "h2", "h3", "h4", "h5", "h6",
                    "blockquote", "figcaption"}
HTML_SKIPPED_TAGS = {"pre", "script", "style", "table", "nav", "header",
                     "footer", "head", "form", "code-block"}
HTML_SKIPPED_IDS = {"hd", "ft", "sidebar", "global-nav", "searchbox",
                    "toc", "content-header", "footer"}
HTML_SKIPPED_CLASSES = {"sphinxsidebar", "related", "nav", "navheader",
                        "navfooter", "toc", "highlight", "refsynopsisdiv",
                        "footer", "breadcrumbs", "programlisting",
                        "screen", "synopsis", "literallayout", "headerlink",
                        "line-block", "doc-footer", "skip-link", "sidebar",
                        "navigationbar", "docnav", "nav-chapters", "nav-wrapper", "example", "informalexample",
                        "index", "footnotes"}
HTML_VOID = {"br", "img", "hr", "meta", "link", "input", "col", "area",
             "base", "wbr", "source"}


class ProseParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs, self.buffer = [], []
        # Open elements, each with whether it is a text block; DocBook's
        # HTML (the Debian handbook) writes paragraphs as <div class="para">.
        self.open = []
        self.block_depth = 0
        self.skip_tag, self.skip_depth = None, 0

    def flush(self):
        text = " ".join("".join(self.buffer).split())
        if text:
            self.paragraphs.append(text)
        self.buffer = []

    def handle_starttag(self, tag, attrs):
        if tag in HTML_VOID:
            return
        if self.skip_tag is not None:
            if tag == self.skip_tag:
                self.skip_depth += 1
            return
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        if (tag in HTML_SKIPPED_TAGS or attrs.get("id") in HTML_SKIPPED_IDS
                or classes & HTML_SKIPPED_CLASSES):
            self.skip_tag, self.skip_depth = tag, 1
            return
        block = tag in HTML_TEXT_BLOCKS or "para" in classes
        self.open.append((tag, block))
        if block:
            self.flush()
            self.block_depth += 1

    def handle_endtag(self, tag):
        if tag in HTML_VOID:
            return
        if self.skip_tag is not None:
            if tag == self.skip_tag:
                self.skip_depth -= 1
                if self.skip_depth == 0:
                    self.skip_tag = None
            return
        if not any(t == tag for t, _ in self.open):
            return  # a stray end tag
        while self.open:
            open_tag, block = self.open.pop()
            if block:
                self.flush()
                self.block_depth -= 1
            if open_tag == tag:
                break

    def handle_data(self, data):
        if self.skip_tag is None and self.block_depth > 0:
            self.buffer.append(data)


def html_to_paragraphs(text):
    parser = ProseParser()
    parser.feed(text)
    parser.close()
    parser.flush()
    # Sphinx puts a pilcrow link after every heading.
    return [p.rstrip("¶ ").strip() for p in parser.paragraphs]


# ---------------------------------------------------------------------------
# AsciiDoc (git's manual pages)

ADOC_INLINE = [
    (re.compile(r"(?:linkgit|link|gitlink):([\w./-]+)\[[^\]]*\]"), r"\1"),
    (re.compile(r"\{litdd\}"), "--"),
    (re.compile(r"\{caret\}"), "^"),
    (re.compile(r"\{tilde\}"), "~"),
    (re.compile(r"\{[\w-]+\}"), ""),
    (re.compile(r"`([^`]*)`"), r"\1"),
    (re.compile(r"(?<!\w)'([^'\n]+)'(?!\w)"), r"\1"),
    (re.compile(r"(?<!\w)\*([^*\n]+)\*(?!\w)"), r"\1"),
    (re.compile(r"(?<!\w)_([^_\n]+)_(?!\w)"), r"\1"),
]


def clean_adoc_inline(text):
    for pattern, replacement in ADOC_INLINE:
        text = pattern.sub(replacement, text)
    return text


def adoc_to_paragraphs(text):
    paragraphs, current = [], []
    delimiter = None
    previous = ""

    def flush():
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        rule = re.match(r"^([-=~^+.*_])\1{3,}$", stripped)
        if delimiter is not None:
            if stripped == delimiter:
                delimiter = None
            previous = ""
            continue
        if rule:
            if previous and abs(len(stripped) - len(previous)) <= 2 \
                    and stripped[0] in "-=~^+":
                previous = ""
                continue  # the underline of the heading just read
            flush()
            if stripped[0] in "-.+":
                delimiter = stripped  # a listing or literal block
            previous = ""
            continue
        previous = stripped
        if not stripped:
            flush()
            continue
        if raw[:1] in (" ", "\t"):
            flush()
            continue  # an indented literal paragraph
        if (stripped.startswith(("[", "include::", "ifdef::", "ifndef::",
                                 "endif::", "//", ":", "ifeval::"))):
            flush()
            continue
        if stripped.endswith("::") or stripped.endswith(";;"):
            flush()
            paragraphs.append(clean_adoc_inline(stripped[:-2]))
            continue
        current.append(clean_adoc_inline(stripped.lstrip("*-. ")
                                         if stripped[:2] in ("* ", "- ")
                                         else stripped))
    flush()
    return paragraphs


# ---------------------------------------------------------------------------
# Sources

# (package, directory under --root, file globs, files excluded, parser)
SOURCES = [
    ("linux-doc-6.1", "usr/share/doc/linux-doc-6.1/Documentation",
     ["**/*.rst.gz", "**/*.txt.gz"], ["translations/"], rst_to_paragraphs),
    ("python3.11-doc", "usr/share/doc/python3.11/html/_sources",
     ["**/*.txt"], [], rst_to_paragraphs),
    ("perl-doc", "usr/share/perl/5.36.0/pod", ["*.pod"], [],
     pod_to_paragraphs),
    ("python-django-doc", "usr/share/doc/python-django-doc/html",
     ["**/*.html"], ["_modules/", "genindex", "py-modindex", "search.html",
                     "releases/"], html_to_paragraphs),
    ("postgresql-doc-15", "usr/share/doc/postgresql-doc-15/html",
     ["*.html"], ["release-", "bookindex", "appendix-obsolete"],
     html_to_paragraphs),
    ("git-doc", "usr/share/doc/git-doc", ["*.txt"], ["RelNotes"],
     adoc_to_paragraphs),
    ("debian-handbook", "usr/share/doc/debian-handbook/html/en-US",
     ["*.html"], ["ix01", "index.html"], html_to_paragraphs),
    ("qtbase5-doc-html", "usr/share/qt5/doc", ["**/*.html"],
     ["-members.html", "-obsolete.html", "classes.html", "functions",
      "modules.html"], html_to_paragraphs),
    ("octave-doc", "usr/share/doc/octave/octave.html", ["*.html"],
     ["index-", "Index"], html_to_paragraphs),
    # The user's guides and module manuals; not the generated API of the
    # wxWidgets and Java bindings.
    ("erlang-doc", "usr/share/doc/erlang-doc", ["**/*.html"],
     ["/wx-", "/jinterface-", "/release_notes", "notes.html"],
     html_to_paragraphs),
    # The books (the Rust book, the reference, the nomicon, ...); not the
    # generated API pages of core, std and alloc.
    ("rust-doc", "usr/share/doc/rust-doc/html",
     ["book/*.html", "reference/**/*.html", "nomicon/*.html",
      "rustc/**/*.html", "edition-guide/**/*.html",
      "embedded-book/**/*.html", "rust-by-example/**/*.html"],
     ["print.html", "toc.html"], html_to_paragraphs),
]


def read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def source_files(root, package, directory, patterns, excluded):
    base = os.path.join(root, directory)
    if not os.path.isdir(base):
        sys.exit(f"make-en-corpus: {base} is missing: install the Debian "
                 f"package {package} (scripts/install-deps.sh does)")
    found = set()
    for pattern in patterns:
        for path in glob.glob(os.path.join(base, pattern), recursive=True):
            rel = os.path.relpath(path, base)
            if os.path.isfile(path) and not any(x in rel for x in excluded):
                found.add(path)
    return sorted(found, key=lambda p: p.encode())


WORD = re.compile(r"[A-Za-z]{2,}")


def is_prose(paragraph):
    """English prose rather than code, a table row or a translation."""
    if len(WORD.findall(paragraph)) < 3:
        return False
    letters = [c for c in paragraph if c.isalpha()]
    # Typographic quotes and dashes are fine; letters outside ASCII are
    # another language (or a table of symbols).
    foreign = sum(c >= "\x80" for c in letters)
    wordy = len(letters) + paragraph.count(" ")
    return foreign <= 0.03 * len(letters) and wordy >= 0.75 * len(paragraph)


def split_long(paragraph, limit):
    """Cuts a paragraph longer than `limit` bytes at sentence ends."""
    pieces, current = [], ""
    for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
        while len(sentence.encode()) > limit:
            cut = sentence.rfind(" ", 0, limit // 2) or limit // 2
            pieces.append((current + " " + sentence[:cut]).strip())
            current, sentence = "", sentence[cut:].strip()
        if current and len((current + " " + sentence).encode()) > limit:
            pieces.append(current)
            current = sentence
        else:
            current = (current + " " + sentence).strip()
    if current:
        pieces.append(current)
    return pieces


def records_of(paragraphs, limit):
    records, current, size = [], [], 0
    for paragraph in paragraphs:
        for piece in (split_long(paragraph, limit)
                      if len(paragraph.encode()) > limit else [paragraph]):
            n = len(piece.encode()) + 2
            if current and size + n > limit:
                records.append("\n\n".join(current))
                current, size = [], 0
            current.append(piece)
            size += n
    if current:
        records.append("\n\n".join(current))
    return records


def package_version(package):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                             capture_output=True, text=True)
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--root", default="/")
    p.add_argument("--max-bytes-per-source", type=int, default=0)
    p.add_argument("--record-bytes", type=int, default=6000)
    p.add_argument("--heldout-every", type=int, default=50)
    a = p.parse_args()
    if a.record_bytes < 200 or a.heldout_every < 2:
        sys.exit("make-en-corpus: --record-bytes must be at least 200 and "
                 "--heldout-every at least 2")

    os.makedirs(a.out, exist_ok=True)
    paths = {k: os.path.join(a.out, k + ".jsonl") for k in ("train", "heldout")}
    outs = {k: open(v + ".tmp", "w", encoding="utf-8") for k, v in paths.items()}
    seen = set()
    table, document = [], 0
    for package, directory, patterns, excluded, parse in SOURCES:
        files = source_files(a.root, package, directory, patterns, excluded)
        prose = {"train": 0, "heldout": 0}
        used = 0
        for path in files:
            if a.max_bytes_per_source and \
                    sum(prose.values()) >= a.max_bytes_per_source:
                break
            kept = []
            for paragraph in parse(read_text(path)):
                paragraph = " ".join(paragraph.split())
                if not is_prose(paragraph):
                    continue
                digest = hashlib.blake2b(paragraph.encode(),
                                         digest_size=16).digest()
                if digest in seen:
                    continue
                seen.add(digest)
                kept.append(paragraph)
            if not kept:
                continue
            used += 1
            split = "heldout" if document % a.heldout_every == \
                a.heldout_every - 1 else "train"
            document += 1
            for record in records_of(kept, a.record_bytes):
                outs[split].write(json.dumps({"text": record},
                                             ensure_ascii=False) + "\n")
                prose[split] += len(record.encode())
        table.append({"package": package, "version": package_version(package),
                      "files": used, "train_bytes": prose["train"],
                      "heldout_bytes": prose["heldout"]})
    for f in outs.values():
        f.close()
    for k, v in paths.items():
        os.replace(v + ".tmp", v)

    total = sum(r["train_bytes"] + r["heldout_bytes"] for r in table)
    print(f"{'package':30} {'version':22} {'files':>6} {'MB':>6}")
    for r in table:
        mb = (r["train_bytes"] + r["heldout_bytes"]) / 1e6
        print(f"{r['package']:30} {r['version']:22} {r['files']:>6} {mb:>6.1f}")
    print(f"{'total':30} {'':22} {'':>6} {total / 1e6:>6.1f}")
    manifest = {
        "command": "scripts/make-en-corpus.py " + " ".join(sys.argv[1:]),
        "sources": table,
        "bytes": total,
        "files": {k: {"path": os.path.basename(v), "bytes": os.path.getsize(v),
                      "sha256": sha256(v)} for k, v in paths.items()},
    }
    with open(os.path.join(a.out, "sources.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    for k, v in manifest["files"].items():
        print(f"make-en-corpus: {k}: {paths[k]} ({v['bytes']} bytes, "
              f"sha256 {v['sha256'][:16]})")


if __name__ == "__main__":
    main()
