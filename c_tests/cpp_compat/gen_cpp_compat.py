#!/usr/bin/env python3
"""Generates the schema-driven part of the differential C++ API suite.

Reads the FileDescriptorSet that protoc writes for onnx.proto and onnx-data.proto
(`protoc --include_imports --descriptor_set_out=...`) and writes, into OUT_DIR:

- schema_ops.h / schema_ops.cpp: for every message, `fill` (sets every field through the
  setters, to a given depth), `walk` (reads every field through the getters into a Digest),
  `rebuild` (copies a message field by field through the setters) and `mutate` (changes every
  field that is set, in place);
- field_tests.cpp: `compat::run_generated_tests()`, which exercises every accessor of every field
  of every message (scalars, enums, strings/bytes, sub-messages, oneofs, repeated fields and their
  RepeatedField / RepeatedPtrField objects), every value of every enum, and the value semantics
  (copy, move, CopyFrom, MergeFrom, Swap, Clear, parse, serialize, text format) of every message.

The output is written at test time into the build directory (never committed).

Usage: gen_cpp_compat.py DESCRIPTOR_SET OUT_DIR
"""

import os
import sys

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto

SCALARS = {
    F.TYPE_INT32: "::int32_t",
    F.TYPE_INT64: "::int64_t",
    F.TYPE_UINT64: "::uint64_t",
    F.TYPE_UINT32: "::uint32_t",
    F.TYPE_FLOAT: "float",
    F.TYPE_DOUBLE: "double",
    F.TYPE_BOOL: "bool",
}

# Values a field of each type is set to, in turn (literals valid on both sides).
VALUES = {
    F.TYPE_INT32: ["7", "-3", "2147483647", "(-2147483647 - 1)"],
    F.TYPE_INT64: ["INT64_C(-1099511627776)", "INT64_C(9223372036854775807)", "INT64_C(1)", "INT64_C(-1)"],
    F.TYPE_UINT64: ["UINT64_C(18446744073709551615)", "UINT64_C(5)", "UINT64_C(1099511627776)", "UINT64_C(0)"],
    F.TYPE_UINT32: ["4294967295u", "5u", "65536u", "0u"],
    F.TYPE_FLOAT: ["1.5f", "-0.0f", "3.25e-3f", "1e30f"],
    F.TYPE_DOUBLE: ["-2.25", "1e-300", "0.1", "12345.678"],
    F.TYPE_BOOL: ["true", "false", "true", "true"],
}


class Message:
    def __init__(self, proto, full_name, cpp):
        self.proto = proto
        self.full_name = full_name  # e.g. onnx.TypeProto.Tensor
        self.cpp = cpp  # e.g. TypeProto_Tensor
        self.name = full_name.split(".", 1)[1]  # e.g. TypeProto.Tensor


class Enum:
    def __init__(self, proto, full_name, cpp, scope):
        self.proto = proto
        self.full_name = full_name
        self.cpp = cpp  # e.g. TensorProto_DataType (or Version at the top level)
        self.scope = scope  # enclosing class (e.g. TensorProto) or None
        self.short = proto.name  # e.g. DataType

    def const(self, value_name):
        """protobuf's name of a value: TensorProto_DataType_FLOAT, or IR_VERSION at the top level."""
        return f"::onnx::{self.cpp}_{value_name}" if self.scope else f"::onnx::{value_name}"


def collect(fds):
    messages, enums = {}, {}

    def add_message(proto, package, outer_full, outer_cpp):
        full = f"{outer_full}.{proto.name}" if outer_full else f"{package}.{proto.name}"
        cpp = f"{outer_cpp}_{proto.name}" if outer_cpp else proto.name
        messages["." + full] = Message(proto, full, cpp)
        for e in proto.enum_type:
            enums["." + full + "." + e.name] = Enum(e, full + "." + e.name, f"{cpp}_{e.name}", cpp)
        for n in proto.nested_type:
            add_message(n, package, full, cpp)

    for f in fds.file:
        for e in f.enum_type:
            enums[f".{f.package}.{e.name}"] = Enum(e, f"{f.package}.{e.name}", e.name, None)
        for m in f.message_type:
            add_message(m, f.package, None, None)
    return messages, enums


class Gen:
    def __init__(self, messages, enums):
        self.messages = messages
        self.enums = enums

    # ---- field classification
    def kind(self, fd):
        if fd.type == F.TYPE_MESSAGE:
            return "message"
        if fd.type in (F.TYPE_STRING, F.TYPE_BYTES):
            return "string"
        if fd.type == F.TYPE_ENUM:
            return "enum"
        return "scalar"

    def oneof(self, msg, fd):
        if fd.HasField("oneof_index") and not fd.proto3_optional:
            return msg.proto.oneof_decl[fd.oneof_index].name
        return None

    def enum_values(self, fd):
        e = self.enums[fd.type_name]
        return e, [e.const(v.name) for v in e.proto.value]

    def values(self, fd):
        """Four C++ expressions a scalar or enum field is set to."""
        if fd.type == F.TYPE_ENUM:
            _, vals = self.enum_values(fd)
            return [vals[1 % len(vals)], vals[-1], vals[0], vals[len(vals) // 2]]
        return VALUES[fd.type]

    def cpp_type(self, fd):
        if fd.type == F.TYPE_ENUM:
            return "::onnx::" + self.enums[fd.type_name].cpp
        if fd.type == F.TYPE_MESSAGE:
            return "::onnx::" + self.messages[fd.type_name].cpp
        if fd.type in (F.TYPE_STRING, F.TYPE_BYTES):
            return "std::string"
        return SCALARS[fd.type]

    def show(self, fd, expr):
        return f"::compat::fmt({expr}).c_str()"

    # ---- schema_ops: fill / walk / rebuild
    def schema_ops(self):
        h = [
            "// @generated by c_tests/cpp_compat/gen_cpp_compat.py from the onnx wheel's schema.",
            "#ifndef CPP_COMPAT_SCHEMA_OPS_H",
            "#define CPP_COMPAT_SCHEMA_OPS_H",
            '#include "harness.h"',
            "namespace compat {",
        ]
        c = [
            "// @generated by c_tests/cpp_compat/gen_cpp_compat.py from the onnx wheel's schema.",
            '#include "schema_ops.h"',
            "namespace compat {",
        ]
        for m in self.messages.values():
            t = f"::onnx::{m.cpp}"
            h.append(f"/// Sets every field of a {m.name} (sub-messages down to `depth`).")
            h.append(f"void fill({t}* m, int depth);")
            h.append(f"/// Reads every field of a {m.name} into `d`.")
            h.append(f"void walk(const {t}& m, Digest& d);")
            h.append(f"/// Copies `s` into `d` field by field through the setters.")
            h.append(f"void rebuild(const {t}& s, {t}* d);")
            h.append(f"/// Changes every field that is set (through mutable_x, set_x, add_x), recursively.")
            h.append(f"void mutate({t}* m);")
            c += self.fill(m) + self.walk(m) + self.rebuild(m) + self.mutate(m)
        h += ["}  // namespace compat", "#endif"]
        c += ["}  // namespace compat"]
        return "\n".join(h) + "\n", "\n".join(c) + "\n"

    def fill(self, m):
        t = f"::onnx::{m.cpp}"
        lines = [f"void fill({t}* m, int depth) {{", "  (void)depth;"]
        for fd in m.proto.field:
            k, n = self.kind(fd), fd.name
            rep = fd.label == F.LABEL_REPEATED
            if k == "message":
                if rep:
                    lines.append(f"  if (depth > 0) {{ fill(m->add_{n}(), depth - 1); fill(m->add_{n}(), 0); }}")
                else:
                    lines.append(f"  if (depth > 0) fill(m->mutable_{n}(), depth - 1);")
            elif k == "string":
                text = f'"{m.name}.{n}"'
                if fd.type == F.TYPE_BYTES:
                    if rep:
                        lines.append(f'  m->add_{n}(std::string("\\x00\\x01\\xff", 3)); m->add_{n}({text});')
                    else:
                        lines.append(f'  m->set_{n}(std::string("\\x00{m.name}.{n}\\xfe", {len(m.name) + len(n) + 3}));')
                else:
                    if rep:
                        lines.append(f'  m->add_{n}({text} "[0]"); m->add_{n}({text} "[1]");')
                    else:
                        lines.append(f"  m->set_{n}({text});")
            else:
                v = self.values(fd)
                if rep:
                    lines.append(f"  m->add_{n}({v[0]}); m->add_{n}({v[1]});")
                else:
                    lines.append(f"  m->set_{n}({v[0]});")
        lines.append("}")
        return lines

    def walk(self, m):
        t = f"::onnx::{m.cpp}"
        lines = [f"void walk(const {t}& m, Digest& d) {{"]
        for o in m.proto.oneof_decl:
            lines.append(f"  d.val(static_cast<int>(m.{o.name}_case()));")
        for fd in m.proto.field:
            k, n, num = self.kind(fd), fd.name, fd.number
            if fd.label == F.LABEL_REPEATED:
                lines.append(f"  d.tag({num}); d.val(m.{n}_size());")
                if k == "message":
                    lines.append(f"  for (int i = 0; i < m.{n}_size(); ++i) walk(m.{n}(i), d);")
                elif k == "string":
                    lines.append(f"  for (const std::string& v : m.{n}()) d.str(v);")
                else:
                    lines.append(f"  for (int i = 0; i < m.{n}_size(); ++i) d.val(m.{n}(i));")
            else:
                if k == "message":
                    lines.append(f"  if (m.has_{n}()) {{ d.tag({num}); walk(m.{n}(), d); }}")
                elif k == "string":
                    lines.append(f"  if (m.has_{n}()) {{ d.tag({num}); d.str(m.{n}()); }}")
                else:
                    lines.append(f"  if (m.has_{n}()) {{ d.tag({num}); d.val(m.{n}()); }}")
        lines.append("}")
        return lines

    def rebuild(self, m):
        t = f"::onnx::{m.cpp}"
        lines = [f"void rebuild(const {t}& s, {t}* d) {{"]
        for fd in m.proto.field:
            k, n = self.kind(fd), fd.name
            if fd.label == F.LABEL_REPEATED:
                if k == "message":
                    lines.append(f"  for (const auto& e : s.{n}()) rebuild(e, d->add_{n}());")
                elif k == "string":
                    lines.append(f"  for (const std::string& v : s.{n}()) d->add_{n}(v);")
                else:
                    lines.append(f"  d->mutable_{n}()->Reserve(s.{n}_size());")
                    lines.append(f"  for (auto v : s.{n}()) d->add_{n}(v);")
            else:
                if k == "message":
                    lines.append(f"  if (s.has_{n}()) rebuild(s.{n}(), d->mutable_{n}());")
                else:
                    lines.append(f"  if (s.has_{n}()) d->set_{n}(s.{n}());")
        lines.append("}")
        return lines

    def changed(self, fd, expr):
        """A C++ expression of the field's type that differs from `expr` (no overflow)."""
        if fd.type == F.TYPE_BOOL:
            return f"!{expr}"
        if fd.type in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
            return f"{expr} * 2"
        if fd.type == F.TYPE_ENUM:
            return expr
        return f"{expr} ^ 1"

    def mutate(self, m):
        t = f"::onnx::{m.cpp}"
        lines = [f"void mutate({t}* m) {{"]
        for fd in m.proto.field:
            k, n = self.kind(fd), fd.name
            if fd.label == F.LABEL_REPEATED:
                if k == "message":
                    lines.append(f"  for (auto& e : *m->mutable_{n}()) mutate(&e);")
                    lines.append(f"  m->add_{n}();")
                elif k == "string":
                    lines.append(f"  for (std::string& v : *m->mutable_{n}()) v += '~';")
                    lines.append(f'  m->add_{n}("added");')
                else:
                    lines.append(f"  for (int i = 0; i < m->{n}_size(); ++i) m->set_{n}(i, {self.changed(fd, f'm->{n}(i)')});")
                    lines.append(f"  m->add_{n}({self.values(fd)[0]});")
            else:
                if k == "message":
                    lines.append(f"  if (m->has_{n}()) mutate(m->mutable_{n}());")
                elif k == "string":
                    lines.append(f'  if (m->has_{n}()) m->mutable_{n}()->append("~");')
                else:
                    lines.append(f"  if (m->has_{n}()) m->set_{n}({self.changed(fd, f'm->{n}()')});")
        lines.append("}")
        return lines

    # ---- field_tests.cpp
    def field_tests(self):
        c = [
            "// @generated by c_tests/cpp_compat/gen_cpp_compat.py from the onnx wheel's schema.",
            "#include <map>",
            "#include <utility>",
            "#include <vector>",
            '#include "schema_ops.h"',
            "namespace {",
            "using ::compat::esc;",
            "using ::compat::hash;",
            "using ::compat::hex;",
            "using ::compat::out;",
        ]
        calls = []
        for m in self.messages.values():
            for fd in m.proto.field:
                fn = f"test_{m.cpp}_{fd.name}"
                calls.append(fn)
                c.append(f"void {fn}() {{")
                c += ["  " + line for line in self.field_test(m, fd)]
                c.append("}")
            fn = f"values_{m.cpp}"
            calls.append(fn)
            c.append(f"void {fn}() {{")
            c += ["  " + line for line in self.value_test(m)]
            c.append("}")
        for e in self.enums.values():
            fn = f"enum_{e.cpp}"
            calls.append(fn)
            c.append(f"void {fn}() {{")
            c += ["  " + line for line in self.enum_test(e)]
            c.append("}")
        c.append("}  // namespace")
        c.append("void compat::run_generated_tests() {")
        c += [f"  {fn}();" for fn in calls]
        c.append("}")
        return "\n".join(c) + "\n"

    def oneof_lines(self, m, fd, label, obj="m"):
        o = self.oneof(m, fd)
        if not o:
            return []
        return [f'out("{label} {o}_case=%d", static_cast<int>({obj}.{o}_case()));']

    def field_test(self, m, fd):
        k = self.kind(fd)
        if fd.label == F.LABEL_REPEATED:
            return getattr(self, f"repeated_{k}")(m, fd)
        return getattr(self, f"singular_{k}")(m, fd)

    def common_tail(self, m, fd, label):
        """Serializes the one-field message, parses it back, compares."""
        t = f"::onnx::{m.cpp}"
        return [
            "{",
            "  const std::string bytes = m.SerializeAsString();",
            f'  out("{label} bytes=%s", hex(bytes).c_str());',
            f"  {t} back;",
            "  COMPAT_CHECK(back.ParseFromString(bytes));",
            "  COMPAT_CHECK(back.SerializeAsString() == bytes);",
            f'  out("{label} text=%s", esc(m.ShortDebugString()).c_str());',
            "}",
        ]

    def singular_scalar(self, m, fd):
        t, n, label = f"::onnx::{m.cpp}", fd.name, f"{m.name}.{fd.name}"
        v = self.values(fd)
        ty = self.cpp_type(fd)
        lines = [
            f"{t} m;",
            f'out("{label} default=%s has=%d", {self.show(fd, f"m.{n}()")}, static_cast<int>(m.has_{n}()));',
        ]
        lines += self.oneof_lines(m, fd, label + " unset")
        lines += [
            f"m.set_{n}({v[0]});",
            f"const {ty} got = m.{n}();",
            f'out("{label} set=%s has=%d", {self.show(fd, "got")}, static_cast<int>(m.has_{n}()));',
        ]
        lines += self.oneof_lines(m, fd, label + " set")
        lines += self.common_tail(m, fd, label)
        lines += [
            f"{t} copy(m);",
            f"m.set_{n}({v[1]});",
            f'out("{label} copy=%s new=%s", {self.show(fd, f"copy.{n}()")}, {self.show(fd, f"m.{n}()")});',
            f"m.set_{n}({v[2]});",
            f"m.set_{n}({v[3]});",
            f'out("{label} last=%s", {self.show(fd, f"m.{n}()")});',
            f"m.clear_{n}();",
            f'out("{label} cleared=%s has=%d size=%zu", {self.show(fd, f"m.{n}()")}, static_cast<int>(m.has_{n}()), m.ByteSizeLong());',
        ]
        lines += self.oneof_lines(m, fd, label + " cleared")
        return lines

    singular_enum = singular_scalar

    def singular_string(self, m, fd):
        t, n, label = f"::onnx::{m.cpp}", fd.name, f"{m.name}.{fd.name}"
        raw = "static_cast<const void*>(kRaw)" if fd.type == F.TYPE_BYTES else "kRaw"
        lines = [
            f"{t} m;",
            f'out("{label} default size=%zu empty=%d has=%d", m.{n}().size(), static_cast<int>(m.{n}().empty()), static_cast<int>(m.has_{n}()));',
        ]
        lines += self.oneof_lines(m, fd, label + " unset")
        lines += [
            f'm.set_{n}(std::string("first"));',
            f"const std::string& ref = m.{n}();",
            f'out("{label} set(string&&)=%s has=%d", ref.c_str(), static_cast<int>(m.has_{n}()));',
        ]
        lines += self.oneof_lines(m, fd, label + " set")
        lines += [
            'const std::string lvalue("lvalue");',
            f"m.set_{n}(lvalue);",
            f'out("{label} set(const string&) ref=%s", ref.c_str());',
            f'm.set_{n}("c-string");',
            f'out("{label} set(const char*) ref=%s size=%zu", ref.c_str(), ref.size());',
            "static const char kRaw[] = {'r', 'a', 'w', '\\0', 'z'};",
            f"m.set_{n}({raw}, sizeof kRaw);",
            f'out("{label} set(ptr, 5) ref=%s size=%zu strlen=%zu nul=%d", esc(ref).c_str(), ref.size(), std::strlen(ref.c_str()), static_cast<int>(ref.c_str()[ref.size()] == 0));',
            f'out("{label} compare eq=%d lt=%d cmp=%d data=%d", static_cast<int>(m.{n}() == std::string(kRaw, 5)), static_cast<int>(m.{n}() < "s"), static_cast<int>(m.{n}().compare("raw") > 0), static_cast<int>(std::memcmp(m.{n}().data(), kRaw, 5) == 0));',
            "std::map<std::string, int> keyed;",
            f"keyed[m.{n}()] = 1;",
            f'keyed[std::string("other")] = 2;',
            f'out("{label} map key found=%d", static_cast<int>(keyed.count(std::string(kRaw, 5))));',
            f"std::string* p = m.mutable_{n}();",
            'p->append("+mut");',
            f'out("{label} mutable=%s same_ptr=%d ref_is_field=%d", esc(m.{n}()).c_str(), static_cast<int>(p == m.mutable_{n}()), static_cast<int>(&ref == p));',
            f"const std::string converted = m.{n}();",
            f"{t} copy(m);",
            f'm.set_{n}("changed");',
            f'out("{label} copy=%s ref=%s converted=%s", esc(copy.{n}()).c_str(), ref.c_str(), esc(converted).c_str());',
        ]
        lines += self.common_tail(m, fd, label)
        lines += [
            f"std::string* released = m.release_{n}();",
            f'out("{label} released=%s has=%d size=%zu", released ? released->c_str() : "(null)", static_cast<int>(m.has_{n}()), m.{n}().size());',
            "delete released;",
        ]
        lines += self.oneof_lines(m, fd, label + " released")
        lines += [
            f'm.set_allocated_{n}(new std::string("allocated"));',
            f'out("{label} set_allocated=%s has=%d", m.{n}().c_str(), static_cast<int>(m.has_{n}()));',
            f"m.set_allocated_{n}(nullptr);",
            f'out("{label} set_allocated(null) has=%d size=%zu", static_cast<int>(m.has_{n}()), m.{n}().size());',
            f'm.set_{n}(std::string(1000, \'x\'));',
            f"m.clear_{n}();",
            f'out("{label} cleared has=%d size=%zu bytes=%zu", static_cast<int>(m.has_{n}()), m.{n}().size(), m.ByteSizeLong());',
            f"{t} c2;",
            f'c2.set_{n}("short");',
            f"const std::string& r2 = c2.{n}();",
            f"c2.set_{n}(std::string(300, 'y'));",
            f'out("{label} ref after growth size=%zu", r2.size());',
        ]
        lines += self.oneof_lines(m, fd, label + " cleared")
        return lines

    def singular_message(self, m, fd):
        t, n, label = f"::onnx::{m.cpp}", fd.name, f"{m.name}.{fd.name}"
        sub = self.cpp_type(fd)
        lines = [
            f"{t} m;",
            f'out("{label} default has=%d size=%zu", static_cast<int>(m.has_{n}()), m.{n}().ByteSizeLong());',
        ]
        lines += self.oneof_lines(m, fd, label + " unset")
        lines += [
            f"{sub}* p = m.mutable_{n}();",
            f'out("{label} mutable has=%d size=%zu", static_cast<int>(m.has_{n}()), m.ByteSizeLong());',
        ]
        lines += self.oneof_lines(m, fd, label + " set")
        lines += [
            "::compat::fill(p, 1);",
            f"const {sub}& ref = m.{n}();",
            f'out("{label} filled same=%d again=%d sub=%zu", static_cast<int>(p == &ref), static_cast<int>(p == m.mutable_{n}()), ref.ByteSizeLong());',
        ]
        lines += self.common_tail(m, fd, label)
        lines += [
            f"{t} copy(m);",
            "p->Clear();",
            f'out("{label} after sub Clear has=%d copy_sub=%zu ref=%zu", static_cast<int>(m.has_{n}()), copy.{n}().ByteSizeLong(), ref.ByteSizeLong());',
            f"const std::string before = copy.{n}().SerializeAsString();",
            f"{sub} detached = copy.{n}();",
            "const std::size_t detached_size = detached.ByteSizeLong();",
            "detached.Clear();",
            f'out("{label} value copy size=%zu, Clear leaves the source: %d", detached_size, static_cast<int>(copy.{n}().SerializeAsString() == before));',
            f"{sub}* released = copy.release_{n}();",
            f'out("{label} released has=%d size=%zu", static_cast<int>(copy.has_{n}()), released->ByteSizeLong());',
        ]
        lines += self.oneof_lines(m, fd, label + " released", "copy")
        lines += [
            f"copy.set_allocated_{n}(released);",
            f'out("{label} set_allocated has=%d same=%d", static_cast<int>(copy.has_{n}()), static_cast<int>(&copy.{n}() == released));',
            "// The message now owns `released`; writes through the pointer are writes to the field.",
            "released->Clear();",
            "::compat::fill(released, 0);",
            f'out("{label} written through the adopted pointer: sub=%zu", copy.{n}().ByteSizeLong());',
            f"copy.set_allocated_{n}(nullptr);",
            f'out("{label} set_allocated(null) has=%d", static_cast<int>(copy.has_{n}()));',
            f"m.clear_{n}();",
            f'out("{label} cleared has=%d size=%zu", static_cast<int>(m.has_{n}()), m.ByteSizeLong());',
        ]
        lines += self.oneof_lines(m, fd, label + " cleared")
        return lines

    def repeated_scalar(self, m, fd):
        t, n, label = f"::onnx::{m.cpp}", fd.name, f"{m.name}.{fd.name}"
        v = self.values(fd)
        ty = self.cpp_type(fd)
        show = lambda e: self.show(fd, e)  # noqa: E731
        return [
            f"{t} m;",
            f'out("{label} default size=%d", m.{n}_size());',
            f"m.add_{n}({v[0]});",
            f"m.add_{n}({v[1]});",
            f"m.add_{n}({v[2]});",
            f'out("{label} add size=%d [%s %s %s]", m.{n}_size(), {show(f"m.{n}(0)")}, {show(f"m.{n}(1)")}, {show(f"m.{n}(2)")});',
            f"m.set_{n}(1, {v[3]});",
            "std::string seen;",
            f"for (auto x : m.{n}()) {{ seen += ::compat::fmt(x); seen += ','; }}",
            f'out("{label} set(1) range-for=%s", seen.c_str());',
            f"const auto& cref = m.{n}();",
            f'out("{label} const field size=%d Get(2)=%s [0]=%s data[1]=%s empty=%d", cref.size(), {show("cref.Get(2)")}, {show("cref[0]")}, {show("cref.data()[1]")}, static_cast<int>(cref.empty()));',
        ] + self.common_tail(m, fd, label) + [
            f"auto* rf = m.mutable_{n}();",
            f"*rf->Mutable(0) = {v[2]};",
            f"rf->Add({v[0]});",
            "rf->Reserve(100);",
            f'out("{label} Mutable/Add/Reserve size=%d [0]=%s [3]=%s field_size=%d", rf->size(), {show("(*rf)[0]")}, {show("rf->Get(3)")}, m.{n}_size());',
            "rf->SwapElements(0, 3);",
            "rf->RemoveLast();",
            f"(*rf)[1] = {v[1]};",
            f"std::vector<{ty}> copied(rf->begin(), rf->end());",
            f'out("{label} Swap/RemoveLast size=%zu [%s %s %s] bytes=%s", copied.size(), {show("copied[0]")}, {show("copied[1]")}, {show("copied[2]")}, hex(m.SerializeAsString()).c_str());',
            f"{t} copy(m);",
            "rf->Clear();",
            f'out("{label} Clear empty=%d size=%d copy=%d", static_cast<int>(rf->empty()), m.{n}_size(), copy.{n}_size());',
            f"copy.clear_{n}();",
            f'out("{label} clear size=%d bytes=%zu", copy.{n}_size(), copy.ByteSizeLong());',
        ]

    repeated_enum = repeated_scalar

    def repeated_string(self, m, fd):
        t, n, label = f"::onnx::{m.cpp}", fd.name, f"{m.name}.{fd.name}"
        raw = "static_cast<const void*>(kRaw)" if fd.type == F.TYPE_BYTES else "kRaw"
        return [
            f"{t} m;",
            f'out("{label} default size=%d", m.{n}_size());',
            f'm.add_{n}("c-string");',
            f'm.add_{n}(std::string("moved"));',
            'const std::string lvalue("lvalue");',
            f"m.add_{n}(lvalue);",
            "static const char kRaw[] = {'r', 'a', 'w', '\\0', 'z'};",
            f"m.add_{n}({raw}, sizeof kRaw);",
            f"std::string* added = m.add_{n}();",
            '*added = "via pointer";',
            "std::string joined;",
            f"for (const std::string& s : m.{n}()) {{ joined += esc(s); joined += '|'; }}",
            f'out("{label} add size=%d joined=%s", m.{n}_size(), joined.c_str());',
            f"const std::string& ref = m.{n}(0);",
            f'm.set_{n}(0, "set c-string");',
            f'out("{label} set(0, const char*) ref=%s", ref.c_str());',
            f'm.set_{n}(0, std::string("set moved"));',
            f'out("{label} set(0, string&&) ref=%s", ref.c_str());',
            f"m.set_{n}(0, lvalue);",
            f'out("{label} set(0, const string&) ref=%s", ref.c_str());',
            f"m.set_{n}(1, {raw}, 4);",
            f'out("{label} set(1, ptr, 4)=%s size=%zu nul=%d", esc(m.{n}(1)).c_str(), m.{n}(1).size(), static_cast<int>(m.{n}(1).c_str()[4] == 0));',
            f'm.mutable_{n}(2)->append("+mut");',
            f'out("{label} mutable(2)=%s same=%d", m.{n}(2).c_str(), static_cast<int>(m.mutable_{n}(2) == &m.{n}(2)));',
            f"std::map<std::string, int> keyed;",
            f"for (int i = 0; i < m.{n}_size(); ++i) keyed[m.{n}(i)] = i;",
            f'out("{label} map keys=%zu first=%s", keyed.size(), esc(keyed.begin()->first).c_str());',
        ] + self.common_tail(m, fd, label) + [
            f"auto* rf = m.mutable_{n}();",
            f'*rf->Mutable(3) = "mutated";',
            f"std::string* extra = rf->Add();",
            '*extra = "extra";',
            f'rf->Add(std::string("rvalue"));',
            "rf->Reserve(50);",
            f'out("{label} Mutable/Add size=%d [3]=%s Get(5)=%s [6]=%s field_size=%d", rf->size(), (*rf)[3].c_str(), rf->Get(5).c_str(), (*rf)[6].c_str(), m.{n}_size());',
            "rf->SwapElements(0, 6);",
            "rf->DeleteSubrange(1, 2);",
            "rf->RemoveLast();",
            "std::vector<std::string> copied(rf->begin(), rf->end());",
            "joined.clear();",
            "for (const auto& s : copied) { joined += esc(s); joined += '|'; }",
            f'out("{label} Swap/DeleteSubrange/RemoveLast size=%zu joined=%s bytes=%s", copied.size(), joined.c_str(), hex(m.SerializeAsString()).c_str());',
            f"{t} copy(m);",
            "rf->Clear();",
            f'out("{label} Clear empty=%d size=%d copy=%d copy0=%s", static_cast<int>(rf->empty()), m.{n}_size(), copy.{n}_size(), copy.{n}(0).c_str());',
            f"copy.clear_{n}();",
            f'out("{label} clear size=%d bytes=%zu", copy.{n}_size(), copy.ByteSizeLong());',
        ]

    def repeated_message(self, m, fd):
        t, n, label = f"::onnx::{m.cpp}", fd.name, f"{m.name}.{fd.name}"
        sub = self.cpp_type(fd)
        return [
            f"{t} m;",
            f'out("{label} default size=%d", m.{n}_size());',
            f"{sub}* first = m.add_{n}();",
            "::compat::fill(first, 1);",
            f"const std::string first_bytes = m.{n}(0).SerializeAsString();",
            f"for (int i = 0; i < 100; ++i) m.add_{n}();",
            f"const {sub}& first_ref = m.{n}(0);",
            f'out("{label} grown size=%d first stable=%d value=%d", m.{n}_size(), static_cast<int>(first == &first_ref), static_cast<int>(first->SerializeAsString() == first_bytes));',
            f"{sub}* third = m.mutable_{n}(2);",
            "::compat::fill(third, 0);",
            f'out("{label} mutable(2) same=%d size=%zu", static_cast<int>(third == &m.{n}(2)), m.{n}(2).ByteSizeLong());',
            "std::size_t total = 0;",
            f"for (const auto& e : m.{n}()) total += e.ByteSizeLong();",
            f'out("{label} range-for total=%zu", total);',
            f"for (auto& e : *m.mutable_{n}()) e.Clear();",
            f"::compat::fill(m.mutable_{n}(1), 0);",
            f'out("{label} mutable range-for cleared, [1]=%zu", m.{n}(1).ByteSizeLong());',
            f"auto* rf = m.mutable_{n}();",
            "rf->DeleteSubrange(3, 95);",
            f'out("{label} DeleteSubrange size=%d field_size=%d first_still=%d", rf->size(), m.{n}_size(), static_cast<int>(first == &rf->Get(0)));',
            "::compat::fill(rf->Mutable(0), 1);",
            f"{sub}* added = rf->Add();",
            "::compat::fill(added, 0);",
            "rf->Reserve(64);",
            f'out("{label} Mutable/Add size=%d [0]=%zu [6]=%zu added_stable=%d", rf->size(), (*rf)[0].ByteSizeLong(), rf->Get(6).ByteSizeLong(), static_cast<int>(added == &(*rf)[6]));',
            "rf->SwapElements(0, 6);",
            f'out("{label} SwapElements [0]=%zu [6]=%zu", rf->Get(0).ByteSizeLong(), rf->Get(6).ByteSizeLong());',
            "rf->RemoveLast();",
            "total = 0;",
            "for (auto it = rf->begin(); it != rf->end(); ++it) total += it->ByteSizeLong();",
            f'out("{label} RemoveLast size=%d total=%zu empty=%d", rf->size(), total, static_cast<int>(rf->empty()));',
        ] + self.common_tail(m, fd, label) + [
            f"{t} copy(m);",
            "rf->Clear();",
            f'out("{label} Clear empty=%d size=%d copy=%d", static_cast<int>(rf->empty()), m.{n}_size(), copy.{n}_size());',
            f"copy.clear_{n}();",
            f'out("{label} clear size=%d bytes=%zu", copy.{n}_size(), copy.ByteSizeLong());',
        ]

    def value_test(self, m):
        t, label = f"::onnx::{m.cpp}", m.name
        return [
            f"{t} full;",
            "::compat::fill(&full, 3);",
            "const std::string bytes = full.SerializeAsString();",
            f'out("{label} full size=%zu bytes=%zu hash=%s init=%d", full.ByteSizeLong(), bytes.size(), hash(bytes).c_str(), static_cast<int>(full.IsInitialized()));',
            f"{t} copied(full);",
            f"{t} assigned;",
            "assigned = full;",
            f"{t} moved(std::move(copied));",
            f"{t} move_assigned;",
            "move_assigned = std::move(assigned);",
            f"{t} copy_from;",
            "copy_from.CopyFrom(full);",
            "COMPAT_CHECK(moved.SerializeAsString() == bytes);",
            "COMPAT_CHECK(move_assigned.SerializeAsString() == bytes);",
            "COMPAT_CHECK(copy_from.SerializeAsString() == bytes);",
            "::compat::fill(&copy_from, 0);",
            "COMPAT_CHECK(full.SerializeAsString() == bytes);",
            f"{t} merged;",
            "::compat::fill(&merged, 1);",
            "merged.MergeFrom(full);",
            f'out("{label} MergeFrom size=%zu hash=%s", merged.ByteSizeLong(), hash(merged.SerializeAsString()).c_str());',
            f"{t} a;",
            "::compat::fill(&a, 1);",
            f"{t} b;",
            "::compat::fill(&b, 2);",
            "const std::string a_bytes = a.SerializeAsString();",
            "const std::string b_bytes = b.SerializeAsString();",
            "a.Swap(&b);",
            "COMPAT_CHECK(a.SerializeAsString() == b_bytes && b.SerializeAsString() == a_bytes);",
            "b.Clear();",
            f'out("{label} Clear size=%zu text=[%s]", b.ByteSizeLong(), b.ShortDebugString().c_str());',
            f"{t} parsed;",
            "COMPAT_CHECK(parsed.ParseFromString(bytes));",
            "COMPAT_CHECK(parsed.SerializeAsString() == bytes);",
            f"{t} small;",
            "::compat::fill(&small, 1);",
            f'out("{label} DebugString:\\n%sShortDebugString: %s", small.DebugString().c_str(), small.ShortDebugString().c_str());',
            f'out("{label} full text hash=%s", hash(full.DebugString()).c_str());',
        ]

    def enum_test(self, e):
        p = f"::onnx::{e.cpp}"
        # protobuf's names: nested enums also through the class (TensorProto::DataType_IsValid)
        scoped = f"::onnx::{e.scope}::{e.short}" if e.scope else p
        # protobuf spells the bounds of a nested enum TensorProto_DataType_DataType_MIN
        bound = f"{p}_{e.short}" if e.scope else p
        lines = [
            f'out("enum {e.full_name} MIN=%d MAX=%d ARRAYSIZE=%d", static_cast<int>({bound}_MIN), static_cast<int>({bound}_MAX), static_cast<int>({bound}_ARRAYSIZE));',
            f'out("enum {e.full_name} invalid -1:%d 1000000:%d", static_cast<int>({p}_IsValid(-1)), static_cast<int>({p}_IsValid(1000000)));',
            f"{p} parsed{{}};",
            f'out("enum {e.full_name} Parse(NO_SUCH_NAME)=%d", static_cast<int>({p}_Parse("NO_SUCH_NAME", &parsed)));',
        ]
        if e.scope:
            lines += [
                f"COMPAT_CHECK(::onnx::{e.scope}::{e.short}_MIN == {bound}_MIN);",
                f"COMPAT_CHECK(::onnx::{e.scope}::{e.short}_MAX == {bound}_MAX);",
                f"COMPAT_CHECK(::onnx::{e.scope}::{e.short}_ARRAYSIZE == {bound}_ARRAYSIZE);",
            ]
        for v in e.proto.value:
            const = e.const(v.name)
            lines.append(f"{{  // {v.name}")
            lines.append(f"  const {scoped} value = {const};")
            lines.append(f'  const bool ok = {p}_Parse("{v.name}", &parsed);')
            lines.append(
                f'  out("enum {e.full_name}.{v.name}=%d valid=%d name=%s parse=%d->%d", static_cast<int>(value), '
                f"static_cast<int>({p}_IsValid({v.number})), {p}_Name(value).c_str(), static_cast<int>(ok), static_cast<int>(parsed));"
            )
            if e.scope:
                lines.append(f"  COMPAT_CHECK(::onnx::{e.scope}::{v.name} == value);")
                lines.append(f"  COMPAT_CHECK(::onnx::{e.scope}::{e.short}_IsValid({v.number}));")
                lines.append(f'  COMPAT_CHECK(::onnx::{e.scope}::{e.short}_Name(value) == "{v.name}");')
                lines.append(f"  {p} scoped_parsed{{}};")
                lines.append(f'  COMPAT_CHECK(::onnx::{e.scope}::{e.short}_Parse("{v.name}", &scoped_parsed) && scoped_parsed == value);')
            lines.append("}")
        return lines


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    fds = descriptor_pb2.FileDescriptorSet()
    with open(sys.argv[1], "rb") as f:
        fds.ParseFromString(f.read())
    messages, enums = collect(fds)
    if len(messages) < 30 or len(enums) < 5:
        sys.exit(f"only {len(messages)} messages and {len(enums)} enums in {sys.argv[1]}")
    gen = Gen(messages, enums)
    header, ops = gen.schema_ops()
    os.makedirs(sys.argv[2], exist_ok=True)
    for name, text in [
        ("schema_ops.h", header),
        ("schema_ops.cpp", ops),
        ("field_tests.cpp", gen.field_tests()),
    ]:
        with open(os.path.join(sys.argv[2], name), "w") as f:
            f.write(text)
    print(f"{len(messages)} messages, {sum(len(m.proto.field) for m in messages.values())} fields, {len(enums)} enums")


if __name__ == "__main__":
    main()
