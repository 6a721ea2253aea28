#!/usr/bin/env python3
"""Checks that README.md and docs/*.md describe the project as it is.

usage: docs_test.py [--root DIR] [--readme FILE] --cli RINGLEADER

  --root DIR       the source tree (default: the directory of --readme after resolving links,
                   which is how the Bazel test finds it from its runfiles)
  --readme FILE    README.md (a runfile under Bazel)
  --cli FILE       the built `ringleader` client binary (//client:ringleader)

Checks, each printed as a failure naming the page and line:
  spec      every field of ringleader.v1.JobSpec and of the messages it holds (read from every
            proto/*.proto file: the YAML parser maps keys to these fields by reflection) has a
            row in a docs/ table whose first cell is its dotted path, e.g. `sync.bucket_cap_mb`;
            a row of docs/job-spec.md naming a field that does not exist fails too.
  cli       every subcommand and flag that `ringleader --help` and `ringleader CMD --help`
            print is in docs/cli.md: global flags anywhere in it, a command's flags in the
            section whose heading names `ringleader CMD`.
  daemons   every flag (ABSL_FLAG) of ringleader-coordinator, ringleader-worker and
            ringleader-rank, read from their main sources, is in a docs/ section whose heading
            names the program (test_only_* hooks excepted).
  commands  in code (inline and fenced) of README.md and docs/: `ringleader CMD ...` names a
            real subcommand and only its own or global flags; `ringleader-coordinator ...`,
            `ringleader-worker ...` use real flags; every `//pkg:target` or `//pkg/...` label
            names a package whose BUILD declares the target (or a file of that package).
  paths     every repository path (deploy/demo.sh, worker/sync/, fuzz/corpus/idx/x-*) in
            README.md and docs/ exists.
  links     every relative link [text](target#anchor) resolves to a file and, for .md files,
            to a heading.
"""

import argparse
import glob
import os
import re
import subprocess
import sys

FAILURES = []


def fail(check, where, message):
    FAILURES.append(f"{check}: {where}: {message}")


# ---------------------------------------------------------------------------------------------
# Pages
# ---------------------------------------------------------------------------------------------


class Page:
    def __init__(self, root, rel):
        self.rel = rel
        self.path = os.path.join(root, rel)
        with open(self.path, encoding="utf-8") as f:
            self.lines = f.read().split("\n")
        # (line number, text) of every line inside a fenced code block, and of every inline
        # code span outside them; prose lines with the code spans removed.
        self.code = []
        self.prose = []
        self.headings = []  # (line number, level, text)
        fenced = False
        for number, line in enumerate(self.lines, 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                # A shell comment is prose: `# ringleader vs PyTorch DDP` shows no command.
                self.code.append((number, re.sub(r"(^|\s)#.*", "", line)))
                continue
            heading = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if heading:
                self.headings.append((number, len(heading.group(1)), heading.group(2)))
            for span in re.findall(r"`([^`]+)`", line):
                self.code.append((number, span))
            self.prose.append((number, line))

    def where(self, number):
        return f"{self.rel}:{number}"

    def sections(self):
        """(heading text, first line, last line) of every heading's section."""
        result = []
        for i, (number, level, text) in enumerate(self.headings):
            end = len(self.lines)
            for later_number, later_level, _ in self.headings[i + 1:]:
                if later_level <= level:
                    end = later_number - 1
                    break
            result.append((text, number, end))
        return result

    def text_between(self, first, last):
        return "\n".join(self.lines[first - 1:last])


def anchor_slugs(page):
    """GitHub's anchors for the page's headings."""
    slugs = set()
    seen = {}
    for _, _, text in page.headings:
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
        slug = text.strip().lower()
        slug = re.sub(r"[^\w\- ]", "", slug)
        slug = slug.replace(" ", "-")
        if slug in seen:
            seen[slug] += 1
            slug = f"{slug}-{seen[slug]}"
        else:
            seen[slug] = 0
        slugs.add(slug)
    return slugs


def load_pages(root):
    rels = ["README.md"]
    for path in sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True)):
        rels.append(os.path.relpath(path, root))
    return [Page(root, rel) for rel in rels]


# ---------------------------------------------------------------------------------------------
# spec: JobSpec fields from proto/*.proto
# ---------------------------------------------------------------------------------------------

SCALARS = {
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
    "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
}


def strip_proto_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def parse_proto_messages(text):
    """{qualified name: [(field name, type)]} of every message, nested ones as Outer.Inner."""
    messages = {}
    enums = set()
    stack = []  # (kind, name) of open blocks
    tokens = re.finditer(
        r"(?P<open>\b(?P<kind>message|enum|oneof|service|extend)\s+(?P<name>[\w.]+)\s*\{)"
        r"|(?P<block>\{)|(?P<close>\})"
        r"|(?P<field>(?:(?:optional|repeated|required)\s+)?"
        r"(?P<type>map\s*<[^>]*>|[\w.]+)\s+(?P<fname>\w+)\s*=\s*\d+[^;]*;)",
        text)
    for token in tokens:
        if token.group("open"):
            kind, name = token.group("kind"), token.group("name")
            stack.append((kind, name))
            qualified = ".".join(n for k, n in stack if k == "message")
            if kind == "message":
                messages.setdefault(qualified, [])
            elif kind == "enum":
                enums.add(".".join([n for k, n in stack[:-1] if k == "message"] + [name]))
        elif token.group("block"):
            stack.append(("block", ""))
        elif token.group("close"):
            if stack:
                stack.pop()
        elif token.group("field"):
            owners = [n for k, n in stack if k == "message"]
            inner = [k for k, _ in stack if k not in ("message", "oneof")]
            if not owners or inner:
                continue  # options blocks, enums, services
            if token.group("type") in ("reserved", "option"):
                continue
            messages[".".join(owners)].append(
                (token.group("fname"), re.sub(r"\s+", "", token.group("type"))))
    return messages, enums


def resolve_message(type_name, scope, messages):
    """The qualified message name a field type refers to, or None (scalar, enum, unknown)."""
    if type_name in SCALARS or type_name.startswith("map<"):
        return None
    name = type_name.lstrip(".")
    if name.startswith("ringleader.v1."):
        name = name[len("ringleader.v1."):]
    parts = scope.split(".")
    for i in range(len(parts), -1, -1):
        candidate = ".".join(parts[:i] + [name])
        if candidate in messages:
            return candidate
    return None


def spec_field_paths(root):
    paths = sorted(glob.glob(os.path.join(root, "proto", "**", "*.proto"), recursive=True))
    messages, _ = {}, set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            found, _ = parse_proto_messages(strip_proto_comments(f.read()))
        for name, fields in found.items():
            messages.setdefault(name, []).extend(fields)
    if "JobSpec" not in messages:
        fail("spec", "proto/*.proto", "no `message JobSpec` found: the doc test cannot list the "
             "spec's fields")
        return set(), set()
    leaves, inner = set(), set()

    def walk(message, prefix, seen):
        for name, type_name in messages[message]:
            path = prefix + name
            nested = resolve_message(type_name, message, messages)
            if nested is None or type_name.startswith("google.protobuf."):
                leaves.add(path)
            elif nested in seen:
                leaves.add(path)
            else:
                inner.add(path)
                walk(nested, path + ".", seen | {nested})

    walk("JobSpec", "", {"JobSpec"})
    return leaves, inner


FIELD_ROW = re.compile(r"^\|\s*`([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)`\s*\|")


def check_spec(root, pages):
    leaves, inner = spec_field_paths(root)
    if not leaves:
        return
    documented = set()
    for page in pages:
        if not page.rel.startswith("docs"):
            continue
        for number, line in page.prose:
            row = FIELD_ROW.match(line)
            if row:
                documented.add(row.group(1))
                if page.rel == os.path.join("docs", "job-spec.md") and \
                        row.group(1) not in leaves | inner:
                    fail("spec", page.where(number), f"`{row.group(1)}` is not a JobSpec field "
                         "(proto/*.proto): remove or rename the row")
    for path in sorted(leaves - documented):
        fail("spec", "docs/job-spec.md", f"the JobSpec field `{path}` has no row (a table row "
             f"starting with | `{path}` |, its default and meaning)")
    print(f"spec: {len(leaves)} JobSpec fields, each documented" if not any(
        f.startswith("spec") for f in FAILURES) else "spec: FAILED")


# ---------------------------------------------------------------------------------------------
# cli: ringleader --help
# ---------------------------------------------------------------------------------------------


def run_help(cli, args):
    result = subprocess.run([cli] + args + ["--help"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=60)
    if result.returncode != 0:
        fail("cli", " ".join(["ringleader"] + args + ["--help"]),
             f"exit code {result.returncode}: {result.stdout.strip()}")
    return result.stdout


def help_section(text, title):
    """Lines under `title:` up to the next blank line."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if line.strip() == title:
            for follow in lines[i + 1:]:
                if not follow.strip():
                    break
                out.append(follow)
            break
    return out


def help_flags(lines):
    flags = []
    for line in lines:
        match = re.match(r"^\s+(?:-\w,\s+)?--([\w-]+)", line)
        if match:
            flags.append(match.group(1))
    return flags


def read_cli(cli):
    """({command: [flags]}, [global flags]) as the binary prints them."""
    top = run_help(cli, [])
    commands = {}
    for line in help_section(top, "commands:"):
        match = re.match(r"^\s+([a-z][\w-]*)\s", line)
        if match:
            commands[match.group(1)] = []
    global_flags = help_flags(help_section(top, "global flags:"))
    if not commands or not global_flags:
        fail("cli", "ringleader --help", "found no commands or no global flags in:\n" + top)
    for command in commands:
        commands[command] = help_flags(help_section(run_help(cli, [command]), "flags:"))
    return commands, global_flags


def check_cli(pages, commands, global_flags):
    cli_page = next((p for p in pages if p.rel == os.path.join("docs", "cli.md")), None)
    if cli_page is None:
        fail("cli", "docs/cli.md", "missing")
        return
    whole = "\n".join(cli_page.lines)
    for flag in global_flags:
        if not re.search(rf"--{re.escape(flag)}\b", whole):
            fail("cli", "docs/cli.md", f"the global flag --{flag} is not documented")
    sections = cli_page.sections()
    for command, flags in commands.items():
        mine = [(first, last) for text, first, last in sections
                if re.search(rf"\bringleader {re.escape(command)}\b", text)]
        if not mine:
            fail("cli", "docs/cli.md", f"no section whose heading names `ringleader {command}`")
            continue
        text = "\n".join(cli_page.text_between(first, last) for first, last in mine)
        for flag in flags:
            if not re.search(rf"--{re.escape(flag)}\b", text):
                fail("cli", "docs/cli.md", f"`ringleader {command} --{flag}` is not documented "
                     f"in the section of `ringleader {command}`")
    if not any(f.startswith("cli") for f in FAILURES):
        print(f"cli: {len(commands)} commands, "
              f"{sum(len(f) for f in commands.values())} command flags and "
              f"{len(global_flags)} global flags, each documented")


# ---------------------------------------------------------------------------------------------
# daemons: ABSL_FLAG definitions of the three programs
# ---------------------------------------------------------------------------------------------

PROGRAMS = ["ringleader-coordinator", "ringleader-worker", "ringleader-rank"]


def program_of(rel):
    base = os.path.basename(rel)
    if re.search(r"benchmark|_test|trial", base):
        return None
    if rel.startswith("coordinator" + os.sep):
        return "ringleader-coordinator"
    if rel.startswith("worker" + os.sep) and "daemon" in rel:
        return "ringleader-worker"
    if rel.startswith("worker" + os.sep) and "rank" in rel:
        return "ringleader-rank"
    return None


def read_daemon_flags(root):
    flags = {program: set() for program in PROGRAMS}
    files = {program: [] for program in PROGRAMS}
    for top in ("coordinator", "worker"):
        for path in glob.glob(os.path.join(root, top, "**", "*.cc"), recursive=True):
            rel = os.path.relpath(path, root)
            program = program_of(rel)
            if program is None:
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if "int main(" not in text or "ABSL_FLAG(" not in text:
                continue
            files[program].append(rel)
            for name in re.findall(r"ABSL_FLAG\(\s*[^,]+,\s*(\w+)\s*,", text):
                if not name.startswith("test_only"):
                    flags[program].add(name)
    for program in PROGRAMS:
        if not files[program]:
            fail("daemons", program, "found no main source with ABSL_FLAG definitions under "
                 "coordinator/ or worker/: update tests/docs/docs_test.py")
    return flags


def check_daemons(pages, flags):
    for program, names in flags.items():
        text = ""
        for page in pages:
            if not page.rel.startswith("docs"):
                continue
            for heading, first, last in page.sections():
                if program in heading:
                    text += page.text_between(first, last) + "\n"
        if not text:
            fail("daemons", "docs/", f"no section whose heading names {program}")
            continue
        for name in sorted(names):
            if not re.search(rf"--{re.escape(name)}\b", text):
                fail("daemons", "docs/", f"{program} --{name} is not documented in a section "
                     f"whose heading names {program}")
    if not any(f.startswith("daemons") for f in FAILURES):
        print("daemons: " + ", ".join(f"{p} {len(n)} flags" for p, n in flags.items()) +
              ", each documented")


# ---------------------------------------------------------------------------------------------
# commands: ringleader invocations and Bazel labels shown in the pages
# ---------------------------------------------------------------------------------------------


def command_tail(text, start):
    """The rest of one shell command: up to a comment, a pipe, ; or &&."""
    tail = text[start:]
    return re.split(r"\s#|\||;|&&|`", tail, maxsplit=1)[0]


def check_invocations(pages, commands, global_flags, daemon_flags):
    allowed_global = set(global_flags) | {"help"}
    for page in pages:
        for number, code in page.code:
            for match in re.finditer(r"(?<![\w./-])ringleader[ \t]+([a-z-][\w-]*)", code):
                word = match.group(1)
                if word.startswith("-"):
                    continue  # `ringleader --help`: global flags are checked below
                if word not in commands:
                    fail("commands", page.where(number),
                         f"`ringleader {word}` is not a ringleader command "
                         f"({', '.join(commands)})")
                    continue
                tail = command_tail(code, match.end())
                for flag in re.findall(r"(?<![\w-])--([a-z][\w-]*)", tail):
                    if flag not in commands[word] and flag not in allowed_global:
                        fail("commands", page.where(number),
                             f"`ringleader {word}` has no flag --{flag}")
            for match in re.finditer(r"(?<![\w./-])ringleader[ \t]+(--[a-z][\w-]*)", code):
                if match.group(1)[2:] not in allowed_global:
                    fail("commands", page.where(number),
                         f"`ringleader {match.group(1)}` is not a global flag")
            for program in ("ringleader-coordinator", "ringleader-worker"):
                for match in re.finditer(rf"(?<![\w./-]){program}(?![\w@.-])", code):
                    tail = command_tail(code, match.end())
                    for flag in re.findall(r"(?<![\w-])--([a-z][\w-]*)", tail):
                        if flag not in daemon_flags[program] and flag != "help":
                            fail("commands", page.where(number),
                                 f"`{program}` has no flag --{flag}")


LABEL = re.compile(r"(?<![\w/:@])//([\w./-]*)(?::([\w.+=,@~-]+))?")


def build_file(root, package):
    for name in ("BUILD", "BUILD.bazel"):
        path = os.path.join(root, package, name)
        if os.path.isfile(path):
            return path
    return None


def check_labels(root, pages):
    count = 0
    for page in pages:
        for number, code in page.code:
            for match in LABEL.finditer(code):
                package, target = match.group(1), match.group(2)
                rest = code[match.end():]
                if rest.startswith("<") or rest.startswith(":<"):
                    continue  # a placeholder, e.g. //fuzz:<target>_regression_test
                count += 1
                if package == "..." or package.endswith("/..."):
                    directory = package[:-3].rstrip("/")
                    if not os.path.isdir(os.path.join(root, directory)):
                        fail("commands", page.where(number),
                             f"//{package}: no directory {directory or '.'}")
                    continue
                package = package.rstrip("/")
                build = build_file(root, package)
                if build is None:
                    fail("commands", page.where(number), f"//{package}: no BUILD file in "
                         f"{package or 'the root'}: not a package")
                    continue
                if target is None:
                    target = os.path.basename(package)
                with open(build, encoding="utf-8") as f:
                    text = f.read()
                declared = re.search(rf"\bname\s*=\s*\"{re.escape(target)}\"", text)
                is_file = os.path.exists(os.path.join(root, package, target))
                if not declared and not is_file:
                    fail("commands", page.where(number),
                         f"//{package}:{target}: {os.path.relpath(build, root)} declares no "
                         f"target named \"{target}\" and there is no such file")
    return count


# ---------------------------------------------------------------------------------------------
# paths and links
# ---------------------------------------------------------------------------------------------


def top_level_dirs(root):
    return sorted(d for d in os.listdir(root)
                  if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")
                  and not d.startswith("bazel-"))


def check_paths(root, pages):
    dirs = top_level_dirs(root)
    pattern = re.compile(r"(?<![\w./:~$@<>{}-])((?:" + "|".join(map(re.escape, dirs)) +
                         r")/[^\s`'\"()\[\],;|]*)")
    checked = set()
    for page in pages:
        for number, line in enumerate(page.lines, 1):
            line = re.sub(r"https?://\S+", " ", line)
            for match in pattern.finditer(line):
                path = match.group(1).split("#")[0].rstrip(".:,")
                if re.search(r"[<>{}$]", path):
                    continue  # a placeholder: fuzz/corpus/<name>/
                if path.endswith("/..."):
                    path = path[:-4]
                if ":" in path:
                    path = path.split(":")[0]  # pkg:target written without the //
                checked.add(path)
                full = os.path.join(root, path)
                exists = glob.glob(full) if "*" in path or "?" in path else \
                    os.path.exists(full)
                if not exists:
                    fail("paths", page.where(number), f"{path} does not exist")
    return len(checked)


def check_links(root, pages):
    by_path = {os.path.normpath(p.path): p for p in pages}
    count = 0
    for page in pages:
        for number, line in page.prose:
            line = re.sub(r"`[^`]*`", "", line)
            for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
                if re.match(r"^[a-z]+:", target) or target.startswith("/"):
                    continue  # https://..., mailto:
                count += 1
                file_part, _, anchor = target.partition("#")
                linked = page.path if not file_part else \
                    os.path.normpath(os.path.join(os.path.dirname(page.path), file_part))
                if not os.path.exists(linked):
                    fail("links", page.where(number), f"{target}: no file "
                         f"{os.path.relpath(linked, root)}")
                    continue
                if anchor and linked.endswith(".md"):
                    other = by_path.get(linked) or Page(root, os.path.relpath(linked, root))
                    if anchor not in anchor_slugs(other):
                        fail("links", page.where(number),
                             f"{target}: no heading #{anchor} in {other.rel}")
    return count


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root")
    parser.add_argument("--readme")
    parser.add_argument("--cli", required=True)
    args = parser.parse_args()
    root = args.root
    if root is None:
        if args.readme is None:
            parser.error("give --root or --readme")
        root = os.path.dirname(os.path.realpath(args.readme))
    root = os.path.abspath(root)
    if not os.path.isfile(os.path.join(root, "WORKSPACE")):
        print(f"FAIL: {root} is not the source tree (no WORKSPACE)")
        return 1
    pages = load_pages(root)

    check_spec(root, pages)
    commands, global_flags = read_cli(args.cli)
    check_cli(pages, commands, global_flags)
    daemon_flags = read_daemon_flags(root)
    check_daemons(pages, daemon_flags)
    check_invocations(pages, commands, global_flags, daemon_flags)
    labels = check_labels(root, pages)
    paths = check_paths(root, pages)
    links = check_links(root, pages)
    print(f"commands, paths, links: {labels} labels, {paths} repository paths, {links} links "
          f"in {len(pages)} pages")

    if FAILURES:
        print(f"\nFAIL: {len(FAILURES)} problem(s) in README.md and docs/:")
        for failure in FAILURES:
            print("  " + failure)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
