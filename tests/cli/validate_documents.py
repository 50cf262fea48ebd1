#!/usr/bin/env python3
"""validate_documents.py [--as NAME-VERSION] FILE...: checks each JSON document the tool writes
or reads against its JSON Schema in docs/schemas/ (draft 2020-12, python3-jsonschema).

A document's "schema" ("dsatopk-audit/report") and "schema_version" (1) select
docs/schemas/report-1.schema.json; --as report-1 names the schema of documents that carry none
(a policy may leave both out). Prints "ok FILE (NAME-VERSION)" per valid document and, per
invalid one, up to ten "FILE: $.JSON.PATH: message" lines.
validate_documents.py --check-schemas: checks every schema file against the draft 2020-12
meta-schema and that its $id names its file.
validate_documents.py --documents-in DIR: checks every *.json in DIR that names a schema of this
tool, once per distinct content, and leaves the others alone (the copies tests/cli/lib.sh keeps
of what json_check looked at).

Exit 0 when every document is valid, 1 when one is not (or has no schema file), 2 on usage
errors, 77 when python3-jsonschema is not installed (tests/cli/test_schemas.sh turns that into a
failure under CI)."""
import glob
import json
import os
import sys

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                          "schemas")
SCHEMA_PREFIX = "dsatopk-audit/"
ID_BASE = "https://dsatopk-audit.invalid/schemas/"
MAX_ERRORS = 10

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError:  # pragma: no cover - depends on the machine
    jsonschema = None


def load_schemas(directory=SCHEMA_DIR):
    """{file name without .schema.json: schema} of every schema in directory."""
    schemas = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.schema.json"))):
        with open(path, encoding="utf-8") as handle:
            schemas[os.path.basename(path)[:-len(".schema.json")]] = json.load(handle)
    return schemas


def make_validator(schema, schemas):
    """A validator for schema that resolves $refs into the other schemas of the folder, with the
    referencing library (jsonschema >= 4.18) or the older RefResolver (Debian 12's 4.10)."""
    try:
        from referencing import Registry, Resource
    except ImportError:
        store = {item["$id"]: item for item in schemas.values()}
        resolver = jsonschema.RefResolver.from_schema(schema, store=store)
        return Draft202012Validator(schema, resolver=resolver)
    registry = Registry().with_resources(
        (item["$id"], Resource.from_contents(item)) for item in schemas.values())
    return Draft202012Validator(schema, registry=registry)


def json_path(path):
    text = "$"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def schema_name(document):
    """NAME-VERSION of a document, or None when it names no schema of this tool."""
    if not isinstance(document, dict):
        return None
    schema, version = document.get("schema"), document.get("schema_version")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        return None
    if not isinstance(version, int) or isinstance(version, bool):
        return None
    return f"{schema[len(SCHEMA_PREFIX):]}-{version}"


def describe(error):
    """The error's message, with the closest failing branch of an anyOf / oneOf / if."""
    message = error.message
    if error.context:
        # The branch that got furthest: for a nullable object, the object's error, not "is
        # not of type 'null'". The failing value is cut short so that the branch's error shows.
        deepest = max(error.context, key=lambda e: (len(e.absolute_path),
                                                    e.validator not in ("type", "const")))
        if len(message) > 200:
            message = message[:200] + "..."
        message += f" ({json_path(deepest.absolute_path)}: {describe(deepest)})"
    return message if len(message) < 800 else message[:800] + "..."


def validate_document(document, name, schemas, validators):
    """Error lines ("$.path: message") of document against schema name; [] when valid."""
    if name not in schemas:
        return [f"no schema {name}.schema.json in docs/schemas"]
    if name not in validators:
        validators[name] = make_validator(schemas[name], schemas)
    errors = sorted(validators[name].iter_errors(document),
                    key=lambda e: [str(part) for part in e.absolute_path])
    # A failing allOf branch leaves every property it names "unevaluated" too: that echo of a
    # deeper error is left out.
    paths = [list(e.absolute_path) for e in errors]
    errors = [e for e in errors
              if e.validator != "unevaluatedProperties" or
              not any(len(p) > len(e.absolute_path) and p[:len(e.absolute_path)] ==
                      list(e.absolute_path) for p in paths)]
    return [f"{json_path(e.absolute_path)}: {describe(e)}" for e in errors]


def validate_file(path, forced, schemas, validators, out=sys.stdout):
    """Prints the result for one file; True when it is valid."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as error:
        print(f"{path}: not readable JSON: {error}", file=out)
        return False
    name = forced or schema_name(document)
    if not name:
        print(f"{path}: no \"schema\" and \"schema_version\" of this tool (use --as NAME-VERSION)",
              file=out)
        return False
    problems = validate_document(document, name, schemas, validators)
    for problem in problems[:MAX_ERRORS]:
        print(f"{path}: {problem}", file=out)
    if len(problems) > MAX_ERRORS:
        print(f"{path}: ... {len(problems) - MAX_ERRORS} more", file=out)
    if not problems:
        print(f"ok {path} ({name})", file=out)
    return not problems


def check_directory(directory, schemas):
    """--documents-in: the documents of directory, each distinct content once."""
    seen, validators, valid, checked = set(), {}, True, 0
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        try:
            with open(path, "rb") as handle:
                content = handle.read()
            document = json.loads(content)
        except (OSError, ValueError):
            continue
        if content in seen or not schema_name(document):
            continue
        seen.add(content)
        checked += 1
        valid = validate_file(path, None, schemas, validators) and valid
    print(f"{checked} document(s) checked")
    return 0 if valid else 1


def check_schemas(schemas):
    """Problems with the schema files themselves."""
    problems = []
    for name, schema in schemas.items():
        try:
            Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as error:
            problems.append(f"{name}.schema.json: not a valid draft 2020-12 schema: "
                            f"{error.message}")
        if schema.get("$id") != f"{ID_BASE}{name}.schema.json":
            problems.append(f"{name}.schema.json: $id is {schema.get('$id')!r}, not "
                            f"{ID_BASE}{name}.schema.json")
    return problems


def main(argv):
    args = argv[1:]
    if jsonschema is None:
        print("validate_documents.py: python3-jsonschema is not installed", file=sys.stderr)
        return 77
    schemas = load_schemas()
    if args == ["--check-schemas"]:
        problems = check_schemas(schemas)
        for problem in problems:
            print(problem)
        if not problems:
            print(f"ok: {len(schemas)} schemas in docs/schemas")
        return 1 if problems else 0
    if len(args) == 2 and args[0] == "--documents-in":
        return check_directory(args[1], schemas)
    forced = None
    if len(args) >= 2 and args[0] == "--as":
        forced, args = args[1], args[2:]
    if not args or any(arg.startswith("--") for arg in args):
        print(__doc__, file=sys.stderr)
        return 2
    validators = {}
    results = [validate_file(path, forced, schemas, validators) for path in args]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
