#!/usr/bin/env python3
"""Every document key is spelled once: in src/common/document_keys.h, src/report/report_keys.h or
src/triage/triage_keys.h.

Each string those headers #define (a key, a schema name, a value such as "not_required") must not
appear as a string literal in a call anywhere else in src/: a key reaches JSON only through a call
(cJSON_AddNumberToObject(json, KEY_ROWS, ...), json_member(entry, KEY_VERDICT), a file's own
helper), so a literal "rows" passed to a call is a key spelled by hand. The same word elsewhere is
not a key and is left alone: a command-line option in a getopt table, a printf column header or
message argument (any literal after a format string of the same call), a struct initializer. A
#define of such a literal (a second name for a key) is refused too. A line whose comment says
"not a key" is skipped: the word is a label shown to a reader (an HTML row, a message's JSON path
root) that happens to be spelled like a key. A string the headers define under two names is
refused as well.

Run from the source root (meson's workdir), or give the root as the argument. Exit 0 when the
keys are spelled once, 1 with one line per hand-spelled key (FILE:LINE: "key" (CONSTANT) in CALL).
--self-test checks that the scanner finds what it must and leaves alone what it must.
"""
import os
import re
import sys

HEADERS = ("src/common/document_keys.h", "src/report/report_keys.h", "src/triage/triage_keys.h")
SOURCE_SUFFIXES = (".c", ".h", ".cu", ".cuh", ".in")
NOT_CALLS = {"if", "while", "for", "switch", "return", "sizeof", "defined", "_Alignof",
             "__attribute__", "alignof", "typeof", "__typeof__"}
# #define NAME "string", then nothing but blanks or a comment.
DEFINE = re.compile(r'^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+'
                    r'"((?:[^"\\\n]|\\.)*)"[ \t]*(?:/[*/].*)?$', re.M)


def defined_strings(text):
    """{string: constant} for every #define NAME "string" of a header's text."""
    strings = {}
    for name, value in DEFINE.findall(text):
        strings.setdefault(value, name)
    return strings


def header_definitions(root):
    """(header, constant, string) for every #define NAME "string" of the headers."""
    definitions = []
    for header in HEADERS:
        with open(os.path.join(root, header), encoding="utf-8") as f:
            definitions += [(header, name, value) for name, value in DEFINE.findall(f.read())]
    return definitions


def header_strings(root):
    strings = {}
    for _, name, value in header_definitions(root):
        strings.setdefault(value, name)
    return strings


def defined_twice(definitions):
    """A line per string that two constants define (in one header or two): one of them is a
    second spelling of the key."""
    first, problems = {}, []
    for header, name, value in definitions:
        if value in first:
            problems.append(f'{header}: "{value}" is {name} and {first[value][1]} '
                            f'({first[value][0]}): define it once')
        else:
            first[value] = (header, name)
    return problems


def tokens(text):
    """(kind, value, line) for C source: 'id', 'str' (adjacent literals joined), 'punct', and
    'define' (a #define of one string literal, value that literal). Comments, character literals
    and other preprocessor lines are skipped."""
    i, line, n = 0, 1, len(text)
    pending = None  # a string literal waiting for an adjacent one
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
            continue
        if c == "#" and at_line_start:
            # A whole preprocessor line, with its continuations.
            j = i
            while True:
                k = text.find("\n", j)
                k = n if k < 0 else k
                if k > 0 and text[k - 1] == "\\" and k < n:
                    j = k + 1
                    continue
                break
            directive = text[i:k]
            match = DEFINE.match(directive)
            if pending:
                yield pending
                pending = None
            if match:
                yield ("define", match.group(2), line)
            line += directive.count("\n")
            i = k
            continue
        at_line_start = False
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            value = text[i + 1:j]
            if pending:
                pending = ("str", pending[1] + value, pending[2])
            else:
                pending = ("str", value, line)
            i = j + 1
            continue
        if pending:
            yield pending
            pending = None
        if c == "'":
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            yield ("id", text[i:j], line)
            i = j
            continue
        yield ("punct", c, line)
        i += 1
    if pending:
        yield pending


NOT_A_KEY = re.compile(r"/[*/].*\bnot a key\b")


def hand_spelled(text, strings):
    """(line, literal, call) for each literal of strings passed to a call before any format."""
    marked = {number for number, line in enumerate(text.split("\n"), 1) if NOT_A_KEY.search(line)}
    found = []
    frames = []  # per open bracket: [call name or None, a format string seen]
    previous = None
    for kind, value, line in tokens(text):
        if kind == "define":
            if value in strings and line not in marked:
                found.append((line, value, "#define"))
        elif kind == "str":
            if frames and frames[-1][0] and not frames[-1][1]:
                if "%" in value:
                    frames[-1][1] = True
                elif value in strings and line not in marked:
                    found.append((line, value, frames[-1][0]))
        elif kind == "punct" and value == "(":
            is_call = previous and previous[0] == "id" and previous[1] not in NOT_CALLS
            frames.append([previous[1] if is_call else None, False])
        elif kind == "punct" and value == "{":
            frames.append([None, False])
        elif kind == "punct" and value in ")}":
            if frames:
                frames.pop()
        previous = (kind, value)
    return found


def scan(root):
    strings = header_strings(root)
    problems = defined_twice(header_definitions(root))
    for directory, _, files in os.walk(os.path.join(root, "src")):
        for name in sorted(files):
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root)
            if not name.endswith(SOURCE_SUFFIXES) or relative in HEADERS:
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for line, literal, call in hand_spelled(text, strings):
                problems.append(f'{relative}:{line}: "{literal}" ({strings[literal]}) in {call}')
    return sorted(problems), len(strings)


def self_test():
    strings = {"rows": "KEY_ROWS", "verdict": "KEY_VERDICT", "fail": "VALUE_FAIL"}
    must_find = [
        'cJSON_AddNumberToObject(json, "rows", n);',
        'x = json_member(entry, "verdict");',
        'f(g(a, "rows"), b);',
        'if (strcmp(value, "fail") == 0) {}',
        'a = h("ro" "ws");',
        '#define MY_ROWS "rows"',
        'printf("%d", json_member(e, "rows"));',
        'put_item(writer, "rows"); /* a key */',
    ]
    must_pass = [
        'cJSON_AddNumberToObject(json, KEY_ROWS, n);',
        '{ "rows", required_argument, NULL, OPTION_ROWS },',
        'printf("%6s %7s\\n", "rows", "verdict");',
        'audit_fail(err, AUDIT_EDATA, "%s: bad", "rows");',
        '/* "rows" */ // "verdict"',
        'static const char *name = "rows";',
        '.label = "rows",',
        "char c = '\"'; x = y(\"other\");",
        '#include "rows"',
        'put_item(writer, "rows"); /* a label, not a key */',
        '#define ROOT "rows" /* the document in messages, not a key */',
    ]
    failures = 0
    twice = [("a.h", "KEY_ROWS", "rows"), ("b.h", "KEY_ROW_LIST", "rows"), ("b.h", "KEY_K", "k")]
    if len(defined_twice(twice)) != 1 or defined_twice(twice[1:]):
        print(f"self-test: defined_twice({twice}) is {defined_twice(twice)}")
        failures += 1
    header = ('#define KEY_ROWS "rows"\n#define KEY_PLUGIN "plugin" /* {"path"} */\n'
              '  #  define KEY_K "k" // k\n#define KEY_NOT A_MACRO("x")\n')
    if defined_strings(header) != {"rows": "KEY_ROWS", "plugin": "KEY_PLUGIN", "k": "KEY_K"}:
        print(f"self-test: read {defined_strings(header)} from the header lines")
        failures += 1
    for code in must_find:
        if not hand_spelled(code, strings):
            print(f"self-test: missed the key in: {code}")
            failures += 1
    for code in must_pass:
        if hand_spelled(code, strings):
            print(f"self-test: flagged: {code}")
            failures += 1
    return failures


def main():
    args = sys.argv[1:]
    if args and args[0] == "--self-test":
        failures = self_test()
        print("self-test:", "failed" if failures else "passed")
        return 1 if failures else 0
    root = args[0] if args else "."
    if self_test():
        print("the scanner's self-test failed: its results cannot be trusted")
        return 1
    problems, count = scan(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} document key(s) spelled by hand: use the constant of "
              f"{' or '.join(HEADERS)} named in parentheses")
        return 1
    print(f"ok: the {count} strings of {' and '.join(HEADERS)} are spelled nowhere else in src/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
