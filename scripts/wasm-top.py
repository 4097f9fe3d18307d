#!/usr/bin/env python3
"""Code bytes of a wasm file per crate, largest first: where the browser bundle's size goes.

Reads the function names of the custom "name" section, so run it on the wasm cargo writes
before wasm-bindgen and wasm-opt strip them:

    python3 scripts/wasm-top.py "$CARGO_TARGET_DIR/front/wasm32-unknown-unknown/wasm-release/frontend.wasm"
"""
import re
import sys
from collections import Counter


def leb(data, pos):
    """An unsigned LEB128 at `pos`: (value, position after it)."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def sections(data):
    pos = 8
    while pos < len(data):
        kind = data[pos]
        size, pos = leb(data, pos + 1)
        yield kind, data[pos:pos + size]
        pos += size


def imported_functions(body):
    count, pos = leb(body, 0)
    functions = 0
    for _ in range(count):
        for _ in range(2):  # module and field names
            n, pos = leb(body, pos)
            pos += n
        kind = body[pos]
        pos += 1
        if kind == 0:  # function: type index
            _, pos = leb(body, pos)
            functions += 1
        elif kind == 1:  # table: element type, limits
            pos += 1
            flags, pos = leb(body, pos)
            _, pos = leb(body, pos)
            if flags & 1:
                _, pos = leb(body, pos)
        elif kind == 2:  # memory: limits
            flags, pos = leb(body, pos)
            _, pos = leb(body, pos)
            if flags & 1:
                _, pos = leb(body, pos)
        elif kind == 3:  # global: type, mutability
            pos += 2
        else:
            pos += 1
    return functions


def function_names(body):
    name_len, pos = leb(body, 0)
    if body[pos:pos + name_len] != b"name":
        return None
    pos += name_len
    names = {}
    while pos < len(body):
        sub = body[pos]
        size, pos = leb(body, pos + 1)
        end = pos + size
        if sub == 1:
            count, p = leb(body, pos)
            for _ in range(count):
                index, p = leb(body, p)
                n, p = leb(body, p)
                names[index] = body[p:p + n].decode("utf-8", "replace")
                p += n
        pos = end
    return names


ESCAPES = [("$LT$", "<"), ("$GT$", ">"), ("$RF$", "&"), ("$BP$", "*"), ("$u20$", " "),
           ("$C$", ","), ("$u7b$", "{"), ("$u7d$", "}"), ("..", "::")]
STD = {"core", "alloc", "std"}


def demangle(name):
    """Legacy symbol escapes back to Rust paths: `_$LT$T$u20$as$u20$a..B$GT$` -> `<T as a::B>`."""
    name = name.removeprefix("_")
    for escaped, plain in ESCAPES:
        name = name.replace(escaped, plain)
    return name


def first_crate(path):
    path = path.lstrip("<&*").removeprefix("mut ").removeprefix("dyn ").lstrip("<&*")
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", path)
    return m.group(1) if m else None


def crate_of(name):
    """The crate a function's code belongs to: `core::fmt::write` -> core; for
    `<Type as Trait>::f`, the type's crate unless that is core, alloc or std (then the
    trait's): `<&mut serde_json::de::Deserializer<R> as serde::Deserializer>` -> serde_json."""
    m = re.match(r"_ZN(\d+)", name)
    if m:
        n = int(m.group(1))
        name = name[len(m.group(0)):len(m.group(0)) + n]
        if not name.startswith("_$"):
            return name
    name = demangle(name)
    if name.startswith("<") and " as " in name:
        own, _, trait = name[1:].partition(" as ")
        crate = first_crate(own)
        if crate is None or crate in STD:
            crate = first_crate(trait) or crate
        return crate or "(other)"
    return first_crate(name) or "(other)"


def main(path):
    data = open(path, "rb").read()
    imports, names, sizes = 0, {}, []
    for kind, body in sections(data):
        if kind == 2:
            imports = imported_functions(body)
        elif kind == 10:
            count, pos = leb(body, 0)
            for _ in range(count):
                size, pos = leb(body, pos)
                sizes.append(size)
                pos += size
        elif kind == 0:
            found = function_names(body)
            if found is not None:
                names = found
    if not names:
        sys.exit("no function names in this file: use cargo's wasm, before wasm-bindgen")
    per_crate = Counter()
    for i, size in enumerate(sizes):
        per_crate[crate_of(names.get(imports + i, ""))] += size
    total = sum(per_crate.values())
    print(f"| crate | code kB | share |\n|---|---|---|")
    for crate, size in per_crate.most_common(25):
        print(f"| {crate} | {size / 1000:.0f} | {100 * size / total:.1f}% |")
    print(f"| all | {total / 1000:.0f} | 100% |")


if __name__ == "__main__":
    main(sys.argv[1])
