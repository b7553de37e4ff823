#!/usr/bin/env python3
"""The public surface of a crate, one item per line, from its rustdoc JSON.

    python3 scripts/public_api.py target/doc/lock_core.json

Prints every public item under the path a user writes: modules, types,
their fields and variants, functions and methods with their signatures,
traits with their items, constants, and the trait implementations written
by hand (`impl Clone for lock_core::Locker`; not the auto traits or blanket
ones). `scripts/public-api` compares it with the listing checked in beside
each crate, so that a change to the surface shows in review.
"""

import json
import sys


def main(path):
    with open(path) as file:
        krate = json.load(file)
    root = krate["root"]
    path = [krate["index"][str(root)]["name"]]
    # First the public path of every item (the shortest, where there are
    # several), then the listing, whose types are written by those paths.
    names = {}
    Lister(krate, names, None).module(root, path)
    lines = []
    Lister(krate, names, lines).module(root, path)
    # The format the listing was read from: a toolchain that writes another
    # one may list the same items differently.
    print(f"# rustdoc JSON format {krate['format_version']}")
    for _, line in sorted(set(lines)):
        print(line.replace("$crate::", ""))


class Lister:
    def __init__(self, krate, names, lines):
        self.index = krate["index"]
        self.paths = krate["paths"]
        self.names = names
        self.out = lines
        self.seen = set()
        self.at = ""

    def add(self, line, rank=1):
        """A line of the listing, sorted under the item it belongs to: the
        item first (rank 0), then its members (1), then its impls (2)."""
        if self.out is not None:
            self.out.append(((self.at, rank, line), line))

    def item(self, id):
        return self.index.get(str(id))

    def module(self, id, path):
        module = self.item(id)
        for child in module["inner"]["module"]["items"]:
            self.public(child, path)

    def public(self, id, path):
        item = self.item(id)
        if item is None or item["visibility"] != "public" or hidden(item):
            return
        kind, inner = next(iter(item["inner"].items()))
        if kind == "use":
            self.reexport(inner, path)
            return
        self.named(item, kind, inner, path + [item["name"]])

    def reexport(self, use, path):
        target = self.item(use["id"]) if use.get("id") is not None else None
        if use["is_glob"]:
            if target is not None and "module" in target["inner"]:
                for child in target["inner"]["module"]["items"]:
                    self.public(child, path)
            return
        if target is None:
            # An item of another crate, re-exported whole.
            self.add(f"pub use {'::'.join(path)}::{use['name']} = {use['source']}")
            return
        if hidden(target):
            return
        kind, inner = next(iter(target["inner"].items()))
        self.named(target, kind, inner, path + [use["name"]])

    def named(self, item, kind, inner, path):
        name = "::".join(path)
        key = (item["id"], name)
        if key in self.seen:
            return
        self.seen.add(key)
        known = self.names.get(item["id"])
        if self.out is None:
            if known is None or len(known) > len(name):
                self.names[item["id"]] = name
        elif known != name and kind != "module":
            # Listed whole at its shortest path; here only its other name.
            self.at = name
            self.add(f"pub use {name} = {known}", 0)
            return
        self.at = name
        generics = self.generics(inner.get("generics"))
        exhaustive = not any("non_exhaustive" in a for a in attributes(item))
        prefix = "" if exhaustive else "#[non_exhaustive] "
        if kind == "module":
            self.add(f"pub mod {name}", 0)
            self.module(item["id"], path)
        elif kind == "struct":
            private = " (and private fields)" if stripped(inner["kind"]) else ""
            self.add(f"{prefix}pub struct {name}{generics}{private}", 0)
            self.fields(inner["kind"], name)
            self.impls(inner["impls"], name)
        elif kind == "enum":
            self.add(f"{prefix}pub enum {name}{generics}", 0)
            for variant in inner["variants"]:
                self.variant(self.item(variant), name)
            self.impls(inner["impls"], name)
        elif kind == "union":
            self.add(f"pub union {name}{generics}", 0)
        elif kind == "trait":
            self.add(f"pub trait {name}{generics}{self.bounds(inner['bounds'], ': ')}", 0)
            for child in inner["items"]:
                self.trait_item(self.item(child), name)
            # Implementations for types not listed here (a generic `F`, a
            # foreign type): the others are listed with their type.
            for id in inner.get("implementations", []):
                impl = self.item(id)
                target = impl["inner"]["impl"]["for"] if impl else None
                if target is not None and self.names.get(type_id(target)) is None:
                    self.impls([id], name, all_kinds=True)
        elif kind == "function":
            self.add(f"pub {self.function(item['name'], inner, name)}", 0)
        elif kind == "constant":
            value = (inner.get("const") or {}).get("expr")
            shown = f" = {value}" if value and value != "_" else ""
            self.add(f"pub const {name}: {self.ty(inner['type'])}{shown}", 0)
        elif kind == "static":
            self.add(f"pub static {name}: {self.ty(inner['type'])}", 0)
        elif kind == "type_alias":
            self.add(f"pub type {name}{generics} = {self.ty(inner['type'])}", 0)
        elif kind in ("macro", "proc_macro"):
            self.add(f"pub macro {name}!", 0)
        else:
            self.add(f"pub {kind} {name}", 0)

    def fields(self, kind, owner, all_public=False):
        if kind == "unit":
            return
        if "tuple" in kind:
            for i, field in enumerate(kind["tuple"]):
                if field is not None:
                    self.field(self.item(field), f"{owner}::{i}", all_public)
            return
        body = kind.get("plain") or kind.get("struct")
        for field in body["fields"]:
            item = self.item(field)
            self.field(item, f"{owner}::{item['name']}", all_public)

    def field(self, item, name, all_public):
        # A variant's fields are as public as its enum.
        if item is not None and (all_public or item["visibility"] == "public"):
            self.add(f"pub {name}: {self.ty(item['inner']['struct_field'])}")

    def variant(self, item, owner):
        kind = item["inner"]["variant"]["kind"]
        name = f"{owner}::{item['name']}"
        if kind == "plain":
            self.add(f"pub {name}")
        elif "tuple" in kind:
            types = [self.ty(self.item(f)["inner"]["struct_field"]) for f in kind["tuple"] if f is not None]
            self.add(f"pub {name}({', '.join(types)})")
        else:
            self.add(f"pub {name}")
            self.fields(kind, name, all_public=True)

    def impls(self, impls, owner, all_kinds=False):
        for id in impls:
            item = self.item(id)
            if item is None or hidden(item):
                continue
            inner = item["inner"]["impl"]
            if inner.get("blanket_impl") is not None and not all_kinds:
                continue
            # Of the auto traits, those the API promises (Send, Sync, Unpin).
            if inner.get("is_synthetic") and (inner["trait"] or {}).get("path") not in AUTO:
                continue
            if inner["trait"] is not None and inner["trait"].get("path") == "StructuralPartialEq":
                continue  # what `derive(PartialEq)` adds beside it
            if inner["trait"] is None:
                for child in inner["items"]:
                    child = self.item(child)
                    if child is not None and child["visibility"] == "public" and not hidden(child):
                        self.impl_item(child, owner)
            else:
                generics = self.generics(inner["generics"])
                negative = "!" if inner.get("is_negative") else ""
                trait = self.path(inner["trait"])
                where = self.where_clause(inner["generics"])
                line = f"impl{generics} {negative}{trait} for {self.ty(inner['for'])}{where}"
                types = []
                for child in inner["items"]:
                    child = self.item(child)
                    assoc = child["inner"].get("assoc_type") if child else None
                    if assoc and assoc.get("type") is not None:
                        types.append(f"type {child['name']} = {self.ty(assoc['type'])};")
                if types:
                    line += " { " + " ".join(types) + " }"
                self.add(line, 2)

    def impl_item(self, item, owner):
        kind, inner = next(iter(item["inner"].items()))
        if kind == "function":
            self.add(f"pub {self.function(item['name'], inner, owner + '::' + item['name'])}")
        elif kind in ("assoc_const", "constant"):
            ty = inner.get("type")
            self.add(f"pub const {owner}::{item['name']}: {self.ty(ty) if ty else '?'}")

    def trait_item(self, item, owner):
        kind, inner = next(iter(item["inner"].items()))
        name = f"{owner}::{item['name']}"
        if kind == "function":
            body = " (provided)" if inner.get("has_body") else ""
            self.add(f"{self.function(item['name'], inner, name)}{body}")
        elif kind == "assoc_type":
            self.add(f"type {name}{self.bounds(inner.get('bounds', []), ': ')}")
        elif kind == "assoc_const":
            self.add(f"const {name}: {self.ty(inner['type'])}")

    def function(self, short, inner, name):
        header = inner["header"]
        qualifiers = "".join(
            word + " "
            for word, on in (("const", header.get("is_const")), ("async", header.get("is_async")),
                             ("unsafe", header.get("is_unsafe")))
            if on
        )
        inputs = ", ".join(self.argument(arg, ty) for arg, ty in inner["sig"]["inputs"])
        output = inner["sig"]["output"]
        ret = f" -> {self.ty(output)}" if output is not None else ""
        generics = self.generics(inner["generics"])
        where = self.where_clause(inner["generics"])
        return f"{qualifiers}fn {name}{generics}({inputs}){ret}{where}"

    def argument(self, name, ty):
        if name == "self":
            rendered = self.ty(ty)
            if rendered == "Self":
                return "self"
            if rendered in ("&Self", "&mut Self"):
                return rendered.replace("Self", "self")
            if rendered.startswith("&'") and rendered.endswith(" Self"):
                return rendered[: -len("Self")] + "self"
            return f"self: {rendered}"
        return f"{name}: {self.ty(ty)}"

    def generics(self, generics):
        if not generics:
            return ""
        params = []
        for param in generics["params"]:
            kind = param["kind"]
            if "lifetime" in kind:
                params.append(param["name"])
            elif "type" in kind:
                if kind["type"].get("is_synthetic"):
                    continue  # an `impl Trait` argument
                default = kind["type"].get("default")
                shown = f" = {self.ty(default)}" if default is not None else ""
                params.append(param["name"] + self.bounds(kind["type"]["bounds"], ": ") + shown)
            elif "const" in kind:
                params.append(f"const {param['name']}: {self.ty(kind['const']['type'])}")
        return f"<{', '.join(params)}>" if params else ""

    def where_clause(self, generics):
        predicates = []
        for predicate in generics.get("where_predicates", []):
            if "bound_predicate" in predicate:
                bound = predicate["bound_predicate"]
                predicate = self.ty(bound["type"]) + self.bounds(bound["bounds"], ": ")
                # A derive's own plumbing (pin-project's) is no part of the API.
                if "__private" not in predicate:
                    predicates.append(predicate)
        return f" where {', '.join(predicates)}" if predicates else ""

    def bounds(self, bounds, lead):
        rendered = [self.bound(b) for b in bounds]
        rendered = [b for b in rendered if b]
        return lead + " + ".join(rendered) if rendered else ""

    def bound(self, bound):
        if "trait_bound" in bound:
            tb = bound["trait_bound"]
            modifier = "?" if tb.get("modifier") == "maybe" else ""
            return modifier + self.path(tb["trait"])
        if "outlives" in bound:
            return bound["outlives"]
        return ""

    def path(self, path):
        name = self.names.get(path.get("id")) or path.get("path") or path.get("name") or "?"
        return name + self.args(path.get("args"))

    def args(self, args):
        if not args:
            return ""
        if "angle_bracketed" in args:
            body = args["angle_bracketed"]
            parts = []
            for arg in body["args"]:
                if "lifetime" in arg:
                    parts.append(arg["lifetime"])
                elif "type" in arg:
                    parts.append(self.ty(arg["type"]))
                elif "const" in arg:
                    parts.append(arg["const"].get("expr", "?"))
            for constraint in body.get("constraints", []):
                binding = constraint.get("binding", {})
                if "equality" in binding and "type" in binding["equality"]:
                    parts.append(f"{constraint['name']} = {self.ty(binding['equality']['type'])}")
                elif "constraint" in binding:
                    parts.append(f"{constraint['name']}{self.bounds(binding['constraint'], ': ')}")
            return f"<{', '.join(parts)}>" if parts else ""
        if "parenthesized" in args:
            body = args["parenthesized"]
            inputs = ", ".join(self.ty(t) for t in body["inputs"])
            output = f" -> {self.ty(body['output'])}" if body.get("output") else ""
            return f"({inputs}){output}"
        return ""

    def ty(self, ty):
        if ty is None:
            return "()"
        if isinstance(ty, str):
            return "_" if ty == "infer" else ty
        kind, inner = next(iter(ty.items()))
        if kind == "resolved_path":
            return self.path(inner)
        if kind == "primitive":
            return inner
        if kind == "generic":
            return inner
        if kind == "borrowed_ref":
            lifetime = f"{inner['lifetime']} " if inner.get("lifetime") else ""
            mutable = "mut " if inner.get("is_mutable") else ""
            return f"&{lifetime}{mutable}{self.ty(inner['type'])}"
        if kind == "raw_pointer":
            return f"*{'mut' if inner.get('is_mutable') else 'const'} {self.ty(inner['type'])}"
        if kind == "tuple":
            return f"({', '.join(self.ty(t) for t in inner)})"
        if kind == "slice":
            return f"[{self.ty(inner)}]"
        if kind == "array":
            return f"[{self.ty(inner['type'])}; {inner['len']}]"
        if kind == "impl_trait":
            return "impl " + " + ".join(b for b in (self.bound(b) for b in inner) if b)
        if kind == "dyn_trait":
            traits = [self.path(t["trait"]) for t in inner["traits"]]
            if inner.get("lifetime"):
                traits.append(inner["lifetime"])
            return "dyn " + " + ".join(traits)
        if kind == "qualified_path":
            trait = inner.get("trait")
            self_type = self.ty(inner["self_type"])
            if trait is None or not (trait.get("path") or self.names.get(trait.get("id"))):
                return f"{self_type}::{inner['name']}"
            return f"<{self_type} as {self.path(trait)}>::{inner['name']}"
        if kind == "function_pointer":
            sig = inner["sig"]
            inputs = ", ".join(self.ty(ty) for _, ty in sig["inputs"])
            output = f" -> {self.ty(sig['output'])}" if sig.get("output") is not None else ""
            return f"fn({inputs}){output}"
        return kind


# The auto traits listed: what the API promises of its types and futures.
AUTO = ("Send", "Sync", "Unpin")


def stripped(kind):
    """Whether a struct has fields the listing cannot show (private ones)."""
    if isinstance(kind, dict) and "plain" in kind:
        return kind["plain"].get("has_stripped_fields", False)
    if isinstance(kind, dict) and "tuple" in kind:
        return any(field is None for field in kind["tuple"])
    return False


def type_id(ty):
    """The item id of a named type, if it is one."""
    if isinstance(ty, dict) and "resolved_path" in ty:
        return ty["resolved_path"].get("id")
    return None


def attributes(item):
    attrs = item.get("attrs", [])
    return [a if isinstance(a, str) else json.dumps(a) for a in attrs]


def hidden(item):
    return any("doc(hidden)" in a.replace(" ", "") or "hidden" == a for a in attributes(item))


if __name__ == "__main__":
    main(sys.argv[1])
