#!/usr/bin/env python3
"""normalize_document.py FILE...: prints one line per JSON document, "SHA256  NAME", the digest
of its content with what changes from run to run left out: every "context" object, the keys
that name the time, host, tool version or command line wherever they stand, keys that hold a
duration (ending in _ms or _us) and absolute paths of the temporary directory (TMP in the environment).
The digests pin the documents that `run`, `census`, `diff`, `gate`, `merge` and `baseline` write
(tests/cli/test_documents.sh): a refactoring must leave them unchanged.
With --dump DIR, also writes each normalized document (sorted keys, indented) to DIR/NAME for a
readable diff."""
import hashlib
import json
import os
import sys

VARYING_KEYS = {"utc_time", "generated_utc", "time_utc", "now", "command_line", "tool_version",
                "version_string", "git_revision", "host",
                # a digest of a whole report, its times and host included (gate's verdict)
                "report_sha256"}


def normalize(value, tmp):
    if isinstance(value, dict):
        return {key: normalize(item, tmp) for key, item in value.items()
                if key != "context" and key not in VARYING_KEYS
                and not key.endswith("_ms") and not key.endswith("_us")}
    if isinstance(value, list):
        return [normalize(item, tmp) for item in value]
    if isinstance(value, str) and tmp:
        return value.replace(tmp, "$TMP")
    return value


def main(argv):
    dump = None
    if len(argv) > 2 and argv[1] == "--dump":
        dump, argv = argv[2], [argv[0]] + argv[3:]
    tmp = os.environ.get("TMP", "")
    for path in argv[1:]:
        with open(path, encoding="utf-8") as handle:
            document = normalize(json.load(handle), tmp)
        text = json.dumps(document, sort_keys=True, indent=1)
        name = os.path.basename(path)
        if dump:
            with open(os.path.join(dump, name), "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
        print(hashlib.sha256(text.encode()).hexdigest() + "  " + name)


if __name__ == "__main__":
    main(sys.argv)
