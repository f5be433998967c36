// Differential C++ API suite, hand-written part: what code written against protobuf's onnx.pb.h
// does beyond one field at a time (aliasing, pointers kept across growth, value copies of
// sub-messages, parse and serialize entry points and their error returns, unknown fields, the
// text format), then the walk-and-rebuild of every model listed on the command line.
//
// Usage: cpp_compat_test LIST ROOT — LIST names one model file per line, relative to ROOT.
// Prints the compared output on stdout; exits 1 when a check failed.
#include <algorithm>
#include <istream>
#include <memory>
#include <thread>
#include <vector>

#ifndef ONNXL_SIDE
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <google/protobuf/message_lite.h>
#endif

#include "schema_ops.h"

using compat::esc;
using compat::hash;
using compat::hex;
using compat::out;

namespace {

/// A small model built through the setters, as a converter would.
onnx::ModelProto small_model() {
  onnx::ModelProto model;
  model.set_ir_version(9);
  model.set_producer_name("cpp_compat");
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(21);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("g");
  onnx::NodeProto* node = graph->add_node();
  node->set_op_type("Relu");
  node->add_input("x");
  node->add_output("y");
  onnx::AttributeProto* attr = node->add_attribute();
  attr->set_name("alpha");
  attr->set_type(onnx::AttributeProto::FLOAT);
  attr->set_f(0.5f);
  onnx::ValueInfoProto* input = graph->add_input();
  input->set_name("x");
  onnx::TypeProto_Tensor* tensor_type = input->mutable_type()->mutable_tensor_type();
  tensor_type->set_elem_type(onnx::TensorProto::FLOAT);
  tensor_type->mutable_shape()->add_dim()->set_dim_value(3);
  tensor_type->mutable_shape()->add_dim()->set_dim_param("N");
  onnx::TensorProto* init = graph->add_initializer();
  init->set_name("w");
  init->set_data_type(onnx::TensorProto_DataType_FLOAT);
  init->add_dims(2);
  init->add_float_data(1.25f);
  init->add_float_data(-2.5f);
  return model;
}

/// Returns a sub-message by value (a deep copy in protobuf).
onnx::TensorProto tensor_of(const onnx::AttributeProto& attr) { return attr.t(); }

void aliasing() {
  onnx::ModelProto model = small_model();
  const onnx::GraphProto& graph = model.graph();
  model.mutable_graph()->set_name("renamed");
  out("alias graph ref sees rename: %s", graph.name().c_str());

  onnx::NodeProto* node = model.mutable_graph()->mutable_node(0);
  const std::string& output = node->output(0);
  node->set_output(0, "y2");
  out("alias output ref: %s", output.c_str());
  *node->mutable_output(0) += "_ptr";
  out("alias output via pointer: %s same=%d", output.c_str(), static_cast<int>(node->mutable_output(0) == &output));

  // Pointers from add_/mutable_ stay valid while the repeated field grows.
  std::vector<onnx::NodeProto*> nodes{node};
  for (int i = 0; i < 200; ++i) {
    onnx::NodeProto* n = model.mutable_graph()->add_node();
    n->set_name("n" + std::to_string(i));
    nodes.push_back(n);
  }
  bool stable = true;
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    stable = stable && nodes[i] == &model.graph().node(i);
  }
  out("alias 201 node pointers stable=%d n150=%s", static_cast<int>(stable), nodes[150]->name().c_str());

  // A value copy of a sub-message is a deep copy.
  onnx::AttributeProto attr;
  attr.mutable_t()->set_name("orig");
  onnx::TensorProto t = attr.t();
  t.set_name("copy");
  onnx::TensorProto returned = tensor_of(attr);
  returned.add_dims(5);
  out("copy of sub-message: attr.t=%s t=%s returned dims=%d attr dims=%d", attr.t().name().c_str(), t.name().c_str(),
      returned.dims_size(), attr.t().dims_size());
  onnx::GraphProto graph_copy = model.graph();
  graph_copy.mutable_node(0)->set_op_type("Sigmoid");
  out("copy of graph: model op=%s copy op=%s", model.graph().node(0).op_type().c_str(),
      graph_copy.node(0).op_type().c_str());
  onnx::GraphProto moved = std::move(graph_copy);
  out("moved graph nodes=%d op=%s", moved.node_size(), moved.node(0).op_type().c_str());

  // Converter idioms: sort inputs in place, rename through non-const range-for, erase a node.
  onnx::NodeProto sorted;
  for (const char* name : {"c", "a", "b"}) sorted.add_input(name);
  std::sort(sorted.mutable_input()->begin(), sorted.mutable_input()->end());
  out("sorted inputs: %s %s %s", sorted.input(0).c_str(), sorted.input(1).c_str(), sorted.input(2).c_str());
  for (auto& n : *model.mutable_graph()->mutable_node()) n.set_domain("ai.test");
  model.mutable_graph()->mutable_node()->DeleteSubrange(1, 199);
  out("erased: nodes=%d last=%s domain=%s", model.graph().node_size(), model.graph().node(1).name().c_str(),
      model.graph().node(1).domain().c_str());

  // Reading tensor data as converters do.
  const onnx::TensorProto& init = model.graph().initializer(0);
  std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
  std::vector<float> data(init.float_data().data(), init.float_data().data() + init.float_data_size());
  out("tensor dims=%zu:%lld data=%s,%s", dims.size(), static_cast<long long>(dims[0]), compat::fmt(data[0]).c_str(),
      compat::fmt(data[1]).c_str());
  onnx::TensorProto raw;
  const float values[3] = {1.0f, 2.0f, 3.0f};
  raw.set_raw_data(values, sizeof values);
  float back[3];
  std::memcpy(back, raw.raw_data().data(), raw.raw_data().size());
  out("raw_data size=%zu back=%s", raw.raw_data().size(), compat::fmt(back[2]).c_str());

  // protobuf's container types spelled out, as code that stores them does.
  onnx::GraphProto typed;
  ::google::protobuf::RepeatedPtrField<onnx::NodeProto>* typed_nodes = typed.mutable_node();
  typed_nodes->Add()->set_name("typed");
  const ::google::protobuf::RepeatedPtrField<onnx::NodeProto>& const_nodes = typed.node();
  ::google::protobuf::RepeatedField<int64_t>* typed_dims = typed.add_initializer()->mutable_dims();
  typed_dims->Add(4);
  const ::google::protobuf::RepeatedField<int64_t>& const_dims = typed.initializer(0).dims();
  ::google::protobuf::RepeatedPtrField<std::string>* typed_inputs = typed.mutable_node(0)->mutable_input();
  typed_inputs->Add(std::string("in"));
  const ::google::protobuf::RepeatedPtrField<std::string>& const_inputs = typed.node(0).input();
  out("container types: nodes=%d name=%s dims=%d:%lld inputs=%d:%s", const_nodes.size(), const_nodes.Get(0).name().c_str(),
      const_dims.size(), static_cast<long long>(const_dims.Get(0)), const_inputs.size(), const_inputs.Get(0).c_str());

  // More container and message operations code reaches for.
  onnx::GraphProto more;
  onnx::NodeProto* owned = new onnx::NodeProto;
  owned->set_name("allocated");
  more.mutable_node()->AddAllocated(owned);  // the field owns it (its address may change)
  more.add_node()->set_name("last");
  onnx::NodeProto* last = more.mutable_node()->ReleaseLast();
  out("AddAllocated/ReleaseLast: size=%d [0]=%s released=%s", more.node_size(), more.node(0).name().c_str(),
      last->name().c_str());
  delete last;
  onnx::TensorProto shape;
  for (int64_t d : {2, 3, 4, 5}) shape.add_dims(d);
  *shape.mutable_dims()->Add() = 6;
  shape.mutable_dims()->Truncate(3);
  shape.mutable_dims()->Resize(5, 9);
  std::string dims_text;
  for (int64_t d : shape.dims()) dims_text += std::to_string(d) + ",";
  out("RepeatedField Add()/Truncate/Resize: %s", dims_text.c_str());
  onnx::NodeProto left;
  left.set_name("left");
  onnx::NodeProto right;
  right.set_name("right");
  right.add_input("r");
  {
    using std::swap;
    swap(left, right);
  }
  out("swap: left=%s:%d right=%s:%d", left.name().c_str(), left.input_size(), right.name().c_str(), right.input_size());
  onnx::GraphProto donor;
  donor.set_name("donor");
  donor.add_node()->set_op_type("Abs");
  onnx::ModelProto target;
  *target.mutable_graph() = std::move(donor);
  out("move-assign into mutable_graph: name=%s nodes=%d", target.graph().name().c_str(), target.graph().node_size());
  const std::string one_node = target.graph().node(0).SerializeAsString();
  onnx::NodeProto merged_node;
  merged_node.add_input("a");
  const bool merged_ok = merged_node.MergeFromString(one_node);
  out("MergeFromString=%d inputs=%d op=%s", static_cast<int>(merged_ok), merged_node.input_size(),
      merged_node.op_type().c_str());

  // Oneof: switching the member clears the previous one.
  onnx::TypeProto type;
  type.mutable_tensor_type()->set_elem_type(1);
  out("oneof tensor case=%d", static_cast<int>(type.value_case()));
  type.mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(7);
  out("oneof sequence case=%d has_tensor=%d tensor elem=%d", static_cast<int>(type.value_case()),
      static_cast<int>(type.has_tensor_type()), type.tensor_type().elem_type());
  out("oneof constants not_set=%d tensor=%d sequence=%d", static_cast<int>(onnx::TypeProto::VALUE_NOT_SET),
      static_cast<int>(onnx::TypeProto::kTensorType), static_cast<int>(onnx::TypeProto::kSequenceType));
  onnx::TensorShapeProto_Dimension dim;
  dim.set_dim_value(4);
  dim.set_dim_param("M");
  out("oneof dim case=%d value=%lld param=%s", static_cast<int>(dim.value_case()),
      static_cast<long long>(dim.dim_value()), dim.dim_param().c_str());
  type.clear_value();
  out("oneof clear_value case=%d", static_cast<int>(type.value_case()));
}

void parse_and_serialize() {
  onnx::ModelProto full;
  compat::fill(&full, 3);
  const std::string bytes = full.SerializeAsString();
  out("serialize size=%zu ByteSizeLong=%zu hash=%s init=%d", bytes.size(), full.ByteSizeLong(), hash(bytes).c_str(),
      static_cast<int>(full.IsInitialized()));

  // (each call is made before the line that prints it: argument evaluation order is unspecified)
  std::string to_string;
  bool ok = full.SerializeToString(&to_string);
  out("SerializeToString=%d same=%d", static_cast<int>(ok), static_cast<int>(to_string == bytes));
  std::vector<char> buffer(bytes.size());
  ok = full.SerializeToArray(buffer.data(), static_cast<int>(buffer.size()));
  out("SerializeToArray=%d same=%d", static_cast<int>(ok), static_cast<int>(std::string(buffer.begin(), buffer.end()) == bytes));
  ok = full.SerializeToArray(buffer.data(), static_cast<int>(buffer.size()) - 1);
  out("SerializeToArray(too small)=%d", static_cast<int>(ok));
  std::ostringstream os;
  ok = full.SerializeToOstream(&os);
  out("SerializeToOstream=%d same=%d", static_cast<int>(ok), static_cast<int>(os.str() == bytes));

  onnx::ModelProto m;
  out("ParseFromString=%d", static_cast<int>(m.ParseFromString(bytes) && m.SerializeAsString() == bytes));
  out("ParseFromArray=%d", static_cast<int>(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
                                            m.SerializeAsString() == bytes));
  std::istringstream is(bytes);
  out("ParseFromIstream=%d", static_cast<int>(m.ParseFromIstream(&is) && m.SerializeAsString() == bytes));
  out("ParsePartialFromString=%d", static_cast<int>(m.ParsePartialFromString(bytes) && m.SerializeAsString() == bytes));
  out("ParsePartialFromArray=%d", static_cast<int>(m.ParsePartialFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
                                                   m.SerializeAsString() == bytes));
  // Parsing replaces the content (it does not merge).
  onnx::ModelProto replaced = small_model();
  out("ParseFromString replaces=%d", static_cast<int>(replaced.ParseFromString(bytes) && replaced.SerializeAsString() == bytes));
  ok = replaced.ParseFromString(std::string());
  out("ParseFromString(empty)=%d size=%zu", static_cast<int>(ok), replaced.ByteSizeLong());

  // Malformed inputs: every parse entry point returns false.
  const std::vector<std::pair<const char*, std::string>> bad = {
      {"truncated varint", std::string("\x08\xff", 2)},
      {"overlong varint", std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12)},
      {"length past end", std::string("\x12\x05" "ab", 4)},
      {"field number 0", std::string("\x00\x01", 2)},
      {"wire type 7", std::string("\x0f\x01", 2)},
      {"end group alone", std::string("\x0c", 1)},
      {"unterminated group", std::string("\xa3\x06\x08\x01", 4)},
      {"truncated fixed64", std::string("\x19\x01\x02", 3)},
      {"sub-message past end", std::string("\x3a\x04\x0a\x09" "ab", 6)},
  };
  for (const auto& input : bad) {
    onnx::ModelProto p;
    std::istringstream in(input.second);
    out("bad input %-20s String=%d Array=%d Istream=%d PartialString=%d PartialArray=%d", input.first,
        static_cast<int>(p.ParseFromString(input.second)),
        static_cast<int>(p.ParseFromArray(input.second.data(), static_cast<int>(input.second.size()))),
        static_cast<int>(p.ParseFromIstream(&in)), static_cast<int>(p.ParsePartialFromString(input.second)),
        static_cast<int>(p.ParsePartialFromArray(input.second.data(), static_cast<int>(input.second.size()))));
  }
  // Every prefix of a valid encoding: which ones parse (a cut between fields is a valid message).
  const std::string small = small_model().SerializeAsString();
  std::string accepted;
  for (std::size_t len = 0; len <= small.size(); ++len) {
    onnx::ModelProto p;
    accepted.push_back(p.ParseFromArray(small.data(), static_cast<int>(len)) ? '1' : '0');
  }
  out("prefixes of %zu bytes accepted: %s", small.size(), accepted.c_str());

  // Nesting depth: protobuf refuses input nested deeper than its recursion limit (100).
  std::string depths;
  for (int levels = 46; levels <= 52; ++levels) {
    onnx::TypeProto root;
    onnx::TypeProto* inner = &root;
    for (int i = 0; i < levels; ++i) inner = inner->mutable_sequence_type()->mutable_elem_type();
    inner->mutable_tensor_type()->set_elem_type(1);
    const std::string nested = root.SerializeAsString();
    onnx::TypeProto parsed;
    const bool accepted = parsed.ParseFromString(nested);
    depths += std::to_string(levels) + (accepted ? ":ok " : ":refused ");
  }
  out("nested TypeProto.sequence_type levels %s", depths.c_str());

  onnx::ModelProto text = small_model();
  out("DebugString:\n%s", text.DebugString().c_str());
  out("ShortDebugString: %s", text.ShortDebugString().c_str());
  out("empty DebugString=[%s] Short=[%s]", onnx::ModelProto().DebugString().c_str(),
      onnx::ModelProto().ShortDebugString().c_str());
}

/// A varint of the protobuf wire format.
std::string varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
  return s;
}

/// A model whose tensors span the sizes a stream parse treats apart (payloads of 1 KiB to 200 KiB,
/// in the graph, a node's attribute, a subgraph and a sparse initializer).
onnx::ModelProto payload_model() {
  onnx::ModelProto model = small_model();
  onnx::GraphProto* graph = model.mutable_graph();
  const std::size_t sizes[] = {200 << 10, 1 << 10, 40 << 10, 32 << 10, (32 << 10) - 1, 100 << 10};
  for (std::size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    onnx::TensorProto* t = graph->add_initializer();
    t->set_name("p" + std::to_string(i));
    t->set_data_type(onnx::TensorProto::UINT8);
    t->add_dims(static_cast<int64_t>(sizes[i]));
    std::string bytes(sizes[i], '\0');
    for (std::size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<char>((k * 31 + i) & 0xff);
    t->set_raw_data(bytes);
  }
  onnx::AttributeProto* attr = graph->mutable_node(0)->add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  *attr->mutable_t() = graph->initializer(1);
  attr->mutable_t()->set_raw_data(std::string(64 << 10, 'a'));
  onnx::AttributeProto* body = graph->mutable_node(0)->add_attribute();
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  *body->mutable_g()->add_initializer() = graph->initializer(0);
  onnx::SparseTensorProto* sparse = graph->add_sparse_initializer();
  *sparse->mutable_values() = graph->initializer(2);
  sparse->add_dims(40 << 10);
  return model;
}

/// A stream buffer over a string that cannot seek (a pipe), or that reports `reported` bytes to
/// a seek to its end while holding more (a file that grew), or whose reads fail from `fail_at`.
class TestBuf : public std::streambuf {
 public:
  TestBuf(std::string bytes, bool seekable, std::size_t reported, std::size_t fail_at)
      : bytes_(std::move(bytes)), seekable_(seekable), reported_(reported), fail_at_(fail_at) {}

 protected:
  int_type underflow() override {
    if (pos_ >= bytes_.size() || pos_ >= fail_at_) return traits_type::eof();
    const std::size_t n = std::min({std::size_t(4096), bytes_.size() - pos_, fail_at_ - pos_});
    setg(&bytes_[pos_], &bytes_[pos_], &bytes_[pos_] + n);
    pos_ += n;
    return traits_type::to_int_type(bytes_[pos_ - n]);
  }
  pos_type seekoff(off_type off, std::ios::seekdir dir, std::ios::openmode which) override {
    if (!seekable_) return pos_type(off_type(-1));
    const off_type here = static_cast<off_type>(pos_) - (egptr() - gptr());
    const off_type base = dir == std::ios::beg ? 0 : dir == std::ios::cur ? here : static_cast<off_type>(reported_);
    return seekpos(pos_type(base + off), which);
  }
  pos_type seekpos(pos_type to, std::ios::openmode) override {
    if (!seekable_ || to < 0 || static_cast<std::size_t>(to) > bytes_.size()) return pos_type(off_type(-1));
    pos_ = static_cast<std::size_t>(to);
    setg(nullptr, nullptr, nullptr);
    return to;
  }

 private:
  std::string bytes_;
  bool seekable_;
  std::size_t reported_;
  std::size_t fail_at_;
  std::size_t pos_ = 0;
};

/// ParseFromIstream on the streams a program meets: a file from a position past its start, a
/// string stream, a stream that cannot seek, one that grew after its size was taken, one whose
/// reads fail (before the end, in a large payload, in the structure), a file cut short; the
/// parsed bytes, the return value and the stream's state afterwards. Files go to `dir`.
void istream_parses(const std::string& dir) {
  const std::string bytes = payload_model().SerializeAsString();
  auto report = [&](const char* what, std::istream& in) {
    onnx::ModelProto m = small_model();
    const bool ok = m.ParseFromIstream(&in);
    out("istream %-22s ok=%d same=%d eof=%d fail=%d bad=%d", what, static_cast<int>(ok),
        static_cast<int>(ok && m.SerializeAsString() == bytes), static_cast<int>(in.eof()),
        static_cast<int>(in.fail()), static_cast<int>(in.bad()));
  };
  const std::string path = dir + "/cpp_compat_istream.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f << "PREFIX" << bytes;
  }
  {
    std::ifstream f(path, std::ios::binary);
    f.seekg(6);
    report("file at offset 6", f);
  }
  {
    std::ofstream f(path, std::ios::binary);
    f << bytes.substr(0, bytes.size() / 3);
  }
  {
    std::ifstream f(path, std::ios::binary);
    report("file cut short", f);
  }
  std::remove(path.c_str());
  {
    std::istringstream in(bytes);
    report("string stream", in);
  }
  const std::size_t none = static_cast<std::size_t>(-1);
  {
    TestBuf buf(bytes, false, bytes.size(), none);
    std::istream in(&buf);
    report("not seekable", in);
  }
  {
    TestBuf buf(bytes, true, bytes.size() / 2, none);
    std::istream in(&buf);
    report("grew", in);
  }
  {
    TestBuf buf(bytes, true, bytes.size(), bytes.size() / 2);
    std::istream in(&buf);
    report("fails in the middle", in);
  }
  {
    TestBuf buf(bytes, true, bytes.size(), 100);
    std::istream in(&buf);
    report("fails at 100", in);
  }
  {
    TestBuf buf(bytes, true, bytes.size(), bytes.size());
    std::istream in(&buf);
    report("seekable buffer", in);
  }
  {
    std::istringstream in(bytes);
    in.setstate(std::ios::failbit);
    report("already failed", in);
  }
}

void unknown_fields() {
  // Unknown fields of every wire type, between and after known fields.
  std::string unknown;
  unknown += varint(100 << 3 | 0) + varint(150);
  unknown += varint(101 << 3 | 1) + std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  unknown += varint(102 << 3 | 2) + varint(5) + "hello";
  unknown += varint(103 << 3 | 5) + std::string("\xff\xfe\xfd\xfc", 4);
  unknown += varint(104 << 3 | 3) + varint(1 << 3 | 0) + varint(7) + varint(104 << 3 | 4);
  const std::string known_a = varint(1 << 3 | 0) + varint(8);             // ir_version
  const std::string known_b = varint(2 << 3 | 2) + varint(3) + "abc";     // producer_name
  const std::string input = known_a + unknown + known_b + varint(99 << 3 | 0) + varint(1);
  onnx::ModelProto m;
  bool ok = m.ParseFromString(input);
  out("unknown: parse=%d ir=%lld producer=%s", static_cast<int>(ok), static_cast<long long>(m.ir_version()),
      m.producer_name().c_str());
  out("unknown: reserialized=%s size=%zu", hex(m.SerializeAsString()).c_str(), m.ByteSizeLong());
  out("unknown: text=%s", esc(m.ShortDebugString()).c_str());
  m.set_model_version(3);
  onnx::ModelProto copy(m);
  out("unknown: after set + copy=%s", hex(copy.SerializeAsString()).c_str());

  // Unknown fields inside a nested message survive a parent's round trip.
  onnx::NodeProto node;
  out("unknown nested: parse=%d", static_cast<int>(node.ParseFromString(varint(4 << 3 | 2) + varint(3) + "Add" + unknown)));
  onnx::ModelProto parent;
  *parent.mutable_graph()->add_node() = node;
  const std::string bytes = parent.SerializeAsString();
  onnx::ModelProto again;
  ok = again.ParseFromString(bytes);
  out("unknown nested: reparse=%d same=%d bytes=%s", static_cast<int>(ok),
      static_cast<int>(again.SerializeAsString() == bytes), hex(bytes).c_str());
  out("unknown nested: DebugString:\n%s", again.DebugString().c_str());
  onnx::ModelProto merged;
  merged.set_ir_version(1);
  merged.MergeFrom(m);
  out("unknown: MergeFrom=%s", hex(merged.SerializeAsString()).c_str());
  m.Clear();
  out("unknown: Clear size=%zu", m.ByteSizeLong());
}

/// Empty node doc strings and domains, as exporters write them on every node (onnx_light parses
/// the common values into shared read-only values): read, written, cleared, copied and read from
/// two threads at once.
void empty_doc_strings() {
  onnx::GraphProto g;
  const char* domains[] = {"", "com.microsoft", "", "my.domain", nullptr, "ai.onnx.ml"};
  for (int i = 0; i < 6; ++i) {
    onnx::NodeProto* n = g.add_node();
    n->set_op_type("Relu");
    n->set_doc_string(i == 3 ? "doc" : "");
    if (domains[i] != nullptr) {
      n->set_domain(domains[i]);
    }
  }
  g.add_node()->set_op_type("NoDoc");
  g.add_node()->set_domain("com.microsoft");
  const std::string bytes = g.SerializeAsString();
  onnx::GraphProto m;
  bool ok = m.ParseFromString(bytes);
  out("empty doc: parse=%d same=%d", static_cast<int>(ok), static_cast<int>(m.SerializeAsString() == bytes));
  std::vector<std::thread> readers;
  std::vector<std::size_t> seen(2);
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&m, &seen, t] {
      for (int k = 0; k < 1000; ++k) {
        for (const onnx::NodeProto& n : m.node()) {
          seen[t] += n.doc_string().size() + static_cast<std::size_t>(n.has_doc_string()) + n.domain().size() +
                     static_cast<std::size_t>(n.has_domain());
        }
      }
    });
  }
  for (std::thread& r : readers) {
    r.join();
  }
  out("empty doc: concurrent reads=%zu %zu", seen[0], seen[1]);
  for (const onnx::NodeProto& n : m.node()) {
    out("empty doc: has=%d doc=\"%s\" has domain=%d domain=\"%s\"", static_cast<int>(n.has_doc_string()),
        esc(n.doc_string()).c_str(), static_cast<int>(n.has_domain()), esc(n.domain()).c_str());
  }
  m.mutable_node(0)->mutable_doc_string()->append("written");
  m.mutable_node(1)->clear_doc_string();
  m.mutable_node(1)->mutable_domain()->append(".more");
  m.mutable_node(2)->clear_domain();
  m.mutable_node(5)->set_domain("ai.onnx");
  onnx::NodeProto copy(m.node(2));
  copy.set_overload("o");
  onnx::NodeProto assigned;
  assigned = m.node(2);
  onnx::NodeProto shared_copy(m.node(7));
  const std::vector<const onnx::NodeProto*> nodes = {&m.node(0), &m.node(1), &m.node(2), &m.node(5),
                                                     &m.node(7), &copy,      &assigned,  &shared_copy};
  for (const onnx::NodeProto* n : nodes) {
    out("empty doc: after writes has=%d doc=\"%s\" domain=\"%s\" text=%s", static_cast<int>(n->has_doc_string()),
        esc(n->doc_string()).c_str(), esc(n->domain()).c_str(), esc(n->ShortDebugString()).c_str());
  }
  out("empty doc: reserialized=%s", hex(m.SerializeAsString()).c_str());
}

/// Parses, walks, rebuilds and changes every model listed in `list` (paths relative to `root`).
/// The sub-messages of a parsed model handed to and from C++ as single objects: released and
/// deleted (after the model, on another thread), replaced by `new` objects, moved between
/// models and into repeated fields, a oneof switched. onnx_light cuts a parse's sub-messages
/// from its metadata blocks; protobuf allocates each one: the results must be the same.
void parsed_sub_messages() {
  onnx::ModelProto source = small_model();
  onnx::NodeProto* constant = source.mutable_graph()->add_node();
  constant->set_op_type("ConstantOfShape");
  onnx::AttributeProto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(0.25f);
  // Lists longer than onnx_light keeps inline: a parse cuts them from its blocks.
  for (const char* name : {"shape", "scale", "bias", "extra"}) constant->add_input(name);
  onnx::AttributeProto* perm = constant->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : {0, 2, 1, 3}) perm->add_ints(v);
  for (int i = 0; i < 40; ++i) {
    onnx::ValueInfoProto* vi = source.mutable_graph()->add_value_info();
    vi->set_name("v" + std::to_string(i));
    onnx::TensorShapeProto* shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->add_dim()->set_dim_value(i + 1);
    shape->add_dim()->set_dim_param("batch");
  }
  const std::string bytes = source.SerializeAsString();

  onnx::TypeProto* kept;
  onnx::TensorProto* tensor;
  onnx::TypeProto* other_thread;
  onnx::NodeProto swapped;
  std::string kept_bytes;
  {
    auto parsed = std::make_unique<onnx::ModelProto>();
    COMPAT_CHECK(parsed->ParseFromString(bytes));
    onnx::GraphProto* graph = parsed->mutable_graph();
    // Released: the same object, no longer in the model.
    const onnx::TypeProto* before = &graph->value_info(0).type();
    kept = graph->mutable_value_info(0)->release_type();
    kept_bytes = kept->SerializeAsString();
    out("release_type: same=%d has_type=%d", static_cast<int>(kept == before),
        static_cast<int>(graph->value_info(0).has_type()));
    other_thread = graph->mutable_value_info(1)->release_type();
    tensor = graph->mutable_node(1)->mutable_attribute(0)->release_t();
    // A parsed box replaced by a `new` object, and cleared.
    onnx::TypeProto* fresh = new onnx::TypeProto;
    fresh->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    graph->mutable_value_info(2)->set_allocated_type(fresh);
    out("set_allocated_type: same=%d elem=%d", static_cast<int>(graph->mutable_value_info(2)->mutable_type() == fresh),
        graph->value_info(2).type().tensor_type().elem_type());
    graph->mutable_value_info(3)->clear_type();
    // Parsed lists past their inline slots: read, grown, changed, truncated, swapped out.
    onnx::NodeProto* lists = graph->mutable_node(1);
    const int64_t* ints_before = lists->attribute(1).ints().data();
    lists->mutable_attribute(1)->set_ints(0, 7);
    out("parsed lists: inputs=%d %s ints=%d same=%d", lists->input_size(), lists->input(3).c_str(),
        lists->attribute(1).ints_size(), static_cast<int>(lists->attribute(1).ints().data() == ints_before));
    lists->add_input("grown");
    for (int64_t v = 10; v < 20; ++v) lists->mutable_attribute(1)->add_ints(v);
    lists->mutable_input()->RemoveLast();
    lists->mutable_attribute(1)->mutable_ints()->Truncate(6);
    out("grown lists: inputs=%d %s ints=%d %lld %lld", lists->input_size(), lists->input(3).c_str(),
        lists->attribute(1).ints_size(), static_cast<long long>(lists->attribute(1).ints(0)),
        static_cast<long long>(lists->attribute(1).ints(5)));
    swapped.Swap(graph->mutable_node(1));
    // A parsed oneof member moved to another parsed type, then that oneof switched.
    onnx::TypeProto_Tensor* moved = graph->mutable_value_info(4)->mutable_type()->release_tensor_type();
    graph->mutable_value_info(5)->mutable_type()->set_allocated_tensor_type(moved);
    out("oneof moved: same=%d dims=%d case4=%d", static_cast<int>(&graph->value_info(5).type().tensor_type() == moved),
        graph->value_info(5).type().tensor_type().shape().dim_size(),
        static_cast<int>(graph->value_info(4).type().value_case()));
    graph->mutable_value_info(6)->mutable_type()->mutable_sequence_type()->mutable_elem_type();
    // A parsed shape moved between parsed tensor types, the one it replaces deleted.
    graph->mutable_value_info(7)->mutable_type()->mutable_tensor_type()->set_allocated_shape(
        graph->mutable_value_info(8)->mutable_type()->mutable_tensor_type()->release_shape());
    out("parsed model after changes: %s", hash(parsed->SerializeAsString()).c_str());
    // A copy of the changed model is the same; the model (and its blocks' other parts) freed.
    onnx::ModelProto copy(*parsed);
    COMPAT_CHECK(copy.SerializeAsString() == parsed->SerializeAsString());
  }
  // What was released outlives its model.
  out("kept after the model: same=%d dims=%d", static_cast<int>(kept->SerializeAsString() == kept_bytes),
      kept->tensor_type().shape().dim_size());
  onnx::GraphProto holder;
  holder.mutable_initializer()->AddAllocated(tensor);
  out("released tensor in a repeated field: %s", hash(holder.SerializeAsString()).c_str());
  delete kept;
  std::thread deleter([other_thread] {
    out("deleted on another thread: dims=%d", other_thread->tensor_type().shape().dim_size());
    delete other_thread;
  });
  deleter.join();
  out("swapped out of the model: %s", hash(swapped.SerializeAsString()).c_str());
  // Parsing into a message whose sub-messages were released and replaced reuses or frees the rest.
  onnx::ModelProto again;
  COMPAT_CHECK(again.ParseFromString(bytes) && again.ParseFromString(bytes) && again.SerializeAsString() == bytes);
  onnx::ModelProto merged;
  merged.MergeFrom(again);
  merged.mutable_graph()->mutable_value_info(0)->set_allocated_type(again.mutable_graph()->mutable_value_info(1)->release_type());
  out("merged and moved: %s", hash(merged.SerializeAsString()).c_str());
}

/// Names of the nodes of a list, for printing.
std::string node_names(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
  std::string s = "[";
  for (const onnx::NodeProto& n : nodes) {
    if (s.size() > 1) s += ",";
    s += n.op_type();
  }
  return s + "]";
}

std::string short_of(const google::protobuf::Message& m) { return m.ShortDebugString(); }
std::string type_of(const google::protobuf::MessageLite& m) { return m.GetTypeName(); }

/// The protobuf API onnx's C++ library uses beyond the generated classes: io streams with a
/// total bytes limit and ParseFromCodedStream (onnx/proto_utils.h), Message / MessageLite
/// references to a message, and RepeatedPtrField<M> as a value of its own (inliner, parser).
void protobuf_library_api() {
  const std::string bytes = small_model().SerializeAsString();
  const int size = static_cast<int>(bytes.size());
  for (int block : {-1, 7}) {
    for (int limit : {size + 10, size, size - 1}) {
      google::protobuf::io::ArrayInputStream array(bytes.data(), size, block);
      google::protobuf::io::CodedInputStream coded(&array);
      coded.SetTotalBytesLimit(limit);
      onnx::ModelProto m = small_model();
      m.set_doc_string("replaced");
      bool ok = m.ParseFromCodedStream(&coded);
      out("ParseFromCodedStream block=%d limit=size%+d ok=%d same=%d", block, limit - size, static_cast<int>(ok),
          static_cast<int>(ok && m.SerializeAsString() == bytes));
    }
  }
  {
    google::protobuf::io::CodedInputStream coded(reinterpret_cast<const uint8_t*>(bytes.data()), size);
    onnx::ModelProto m;
    bool ok = m.ParsePartialFromCodedStream(&coded);
    out("ParsePartialFromCodedStream(buffer) ok=%d same=%d", static_cast<int>(ok), static_cast<int>(m.SerializeAsString() == bytes));
  }
  {
    google::protobuf::io::ArrayInputStream array(bytes.data(), size, 5);
    google::protobuf::io::CodedInputStream coded(&array);
    onnx::ModelProto m;
    m.set_doc_string("kept");
    m.set_ir_version(3);
    onnx::ModelProto expected = m;
    bool ok = m.MergeFromCodedStream(&coded);
    bool merged = expected.MergeFromString(bytes);
    out("MergeFromCodedStream ok=%d merged=%d same=%d doc=%s", static_cast<int>(ok), static_cast<int>(merged),
        static_cast<int>(m.SerializeAsString() == expected.SerializeAsString()), m.doc_string().c_str());
  }
  {
    const std::string bad("\x12\x05" "ab", 4);
    google::protobuf::io::ArrayInputStream array(bad.data(), static_cast<int>(bad.size()));
    google::protobuf::io::CodedInputStream coded(&array);
    onnx::ModelProto m;
    out("ParseFromCodedStream(malformed)=%d", static_cast<int>(m.ParseFromCodedStream(&coded)));
  }

  // Message / MessageLite references.
  onnx::ModelProto model = small_model();
  const google::protobuf::Message& message = model;
  const google::protobuf::MessageLite& lite = model.graph().node(0);
  std::string serialized;
  bool ok = message.SerializeToString(&serialized);
  out("Message ShortDebugString=%s", esc(message.ShortDebugString()).c_str());
  out("Message DebugString hash=%s", hash(message.DebugString()).c_str());
  out("Message SerializeAsString same=%d SerializeToString=%d same=%d ByteSizeLong=%zu type=%s init=%d",
      static_cast<int>(message.SerializeAsString() == bytes), static_cast<int>(ok), static_cast<int>(serialized == bytes),
      message.ByteSizeLong(), message.GetTypeName().c_str(), static_cast<int>(message.IsInitialized()));
  out("MessageLite SerializeAsString=%s ByteSizeLong=%zu type=%s", hex(lite.SerializeAsString()).c_str(), lite.ByteSizeLong(),
      lite.GetTypeName().c_str());
  out("by reference: %s / %s", esc(short_of(model.graph().node(0))).c_str(), type_of(model.graph()).c_str());

  // RepeatedPtrField<NodeProto> as a value.
  using NodeList = google::protobuf::RepeatedPtrField<onnx::NodeProto>;
  NodeList list;
  out("default size=%d empty=%d", list.size(), static_cast<int>(list.empty()));
  for (const char* op : {"A", "B", "C", "D", "E"}) list.Add()->set_op_type(op);
  onnx::NodeProto f;
  f.set_op_type("F");
  *list.Add() = f;
  out("added %s", node_names(list).c_str());
  NodeList copy(list);
  copy.Mutable(0)->set_op_type("a");
  out("copy %s original %s", node_names(copy).c_str(), node_names(list).c_str());
  const onnx::NodeProto* second = &list.Get(1);
  NodeList moved(std::move(list));
  out("moved %s same element=%d", node_names(moved).c_str(), static_cast<int>(&moved.Get(1) == second));
  NodeList from_field = model.graph().node();
  out("copy of a field %s", node_names(from_field).c_str());
  NodeList assigned;
  assigned.Add()->set_op_type("X");
  assigned = std::move(copy);
  out("move-assigned %s", node_names(assigned).c_str());
  assigned.Swap(model.mutable_graph()->mutable_node());
  out("Swap: local %s field %s", node_names(assigned).c_str(), node_names(model.graph().node()).c_str());
  std::swap(assigned, *model.mutable_graph()->mutable_node());
  out("std::swap back: local %s field %s", node_names(assigned).c_str(), node_names(model.graph().node()).c_str());
  NodeList::iterator it = moved.erase(moved.begin() + 1);
  out("erase(1) %s next=%s", node_names(moved).c_str(), it->op_type().c_str());
  it = moved.erase(moved.cbegin() + 1, moved.cbegin() + 3);
  out("erase(1,3) %s next=%s", node_names(moved).c_str(), it->op_type().c_str());
  it = moved.erase(moved.cbegin() + 1, moved.cend());
  out("erase(1,end) %s at end=%d", node_names(moved).c_str(), static_cast<int>(it == moved.end()));
  model.mutable_graph()->mutable_node()->Swap(&moved);
  out("field after Swap %s model=%s", node_names(model.graph().node()).c_str(), esc(model.ShortDebugString()).c_str());
  {
    NodeList scoped;
    scoped.Add()->add_attribute()->set_name("dropped");
    *scoped.Add() = model.graph().node(0);
  }
  auto heap = std::make_unique<NodeList>(moved);
  heap->Add()->set_op_type("H");
  out("heap %s", node_names(*heap).c_str());
  heap.reset();
}

void backend_models(const std::string& list, const std::string& root) {
  std::istringstream names(compat::read_file(list));
  std::string name;
  int count = 0;
  onnx::ModelProto reused;
  while (std::getline(names, name)) {
    if (name.empty()) continue;
    const std::string file = compat::read_file(root + "/" + name);
    onnx::ModelProto model;
    if (!model.ParseFromString(file)) {
      ++compat::failures();
      out("FAIL: %s does not parse", name.c_str());
      continue;
    }
    // The other entry points agree: ParseFromArray, ParseFromIstream on the file, MergeFrom.
    onnx::ModelProto from_array;
    std::ifstream stream(root + "/" + name, std::ios::binary);
    onnx::ModelProto from_stream;
    onnx::ModelProto merged;
    merged.MergeFrom(model);
    const bool entry_points = from_array.ParseFromArray(file.data(), static_cast<int>(file.size())) &&
                              from_stream.ParseFromIstream(&stream);
    COMPAT_CHECK(entry_points);
    COMPAT_CHECK(from_array.SerializeAsString() == model.SerializeAsString());
    COMPAT_CHECK(from_stream.SerializeAsString() == from_array.SerializeAsString());
    COMPAT_CHECK(merged.SerializeAsString() == from_array.SerializeAsString());
    compat::Digest digest;
    compat::walk(model, digest);
    // Parsing into a message that held another model (the one before, changed every other
    // time) replaces all of it: the same bytes and the same walk as a parse into a new message.
    COMPAT_CHECK(reused.ParseFromString(file));
    compat::Digest reused_digest;
    compat::walk(static_cast<const onnx::ModelProto&>(reused), reused_digest);
    COMPAT_CHECK(reused.SerializeAsString() == model.SerializeAsString() && reused_digest.h == digest.h);
    if (count % 2 == 0) compat::mutate(&reused);
    // Concurrent reads of one const message are allowed (protobuf's thread-safety rule): two
    // threads walk a copy (whose strings onnx_light has not made std::strings yet) at once and
    // must both see what the walk above saw.
    const onnx::ModelProto shared(model);
    compat::Digest in_thread[2];
    {
      std::thread first([&] { compat::walk(static_cast<const onnx::ModelProto&>(shared), in_thread[0]); });
      compat::walk(static_cast<const onnx::ModelProto&>(shared), in_thread[1]);
      first.join();
    }
    COMPAT_CHECK(in_thread[0].h == digest.h && in_thread[1].h == digest.h);
    onnx::ModelProto rebuilt;
    compat::rebuild(model, &rebuilt);
    const std::string original = model.SerializeAsString();
    const std::string copy = rebuilt.SerializeAsString();
    COMPAT_CHECK(copy == original);

    // Changes made in place to a parsed model: references taken before see them; the sub-message
    // released from one model and handed to another keeps its content.
    onnx::ModelProto changed;
    COMPAT_CHECK(changed.ParseFromString(file));
    const std::string* graph_name = changed.graph().has_name() ? &changed.graph().name() : nullptr;
    const std::string old_name = graph_name ? *graph_name : std::string();
    compat::mutate(&changed);
    COMPAT_CHECK(graph_name == nullptr || *graph_name == old_name + "~");
    const std::string changed_bytes = changed.SerializeAsString();
    const std::string changed_graph = changed.graph().SerializeAsString();
    onnx::ModelProto adopter;
    adopter.set_allocated_graph(changed.release_graph());
    COMPAT_CHECK(!changed.has_graph() && adopter.graph().SerializeAsString() == changed_graph);

    out("model %s bytes=%zu visited=%llu digest=%s rebuilt_same=%d file_same=%d changed=%zu:%s", name.c_str(),
        original.size(), static_cast<unsigned long long>(digest.visited), digest.text().c_str(),
        static_cast<int>(copy == original), static_cast<int>(original == file), changed_bytes.size(),
        hash(changed_bytes).c_str());
    ++count;
  }
  out("models walked and rebuilt: %d", count);
  COMPAT_CHECK(count > 100);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL_LIST ROOT\n", argv[0]);
    return 2;
  }
  out("== generated: every field, enum and message");
  compat::run_generated_tests();
  out("== aliasing and copies");
  aliasing();
  out("== parse and serialize");
  parse_and_serialize();
  out("== ParseFromIstream on streams");
  const std::string list = argv[1];
  istream_parses(list.find('/') == std::string::npos ? "." : list.substr(0, list.find_last_of('/')));
  out("== unknown fields");
  unknown_fields();
  out("== empty doc strings");
  empty_doc_strings();
  out("== sub-messages of a parsed model");
  parsed_sub_messages();
  out("== protobuf library API (io streams, Message, standalone RepeatedPtrField)");
  protobuf_library_api();
  out("== backend models");
  backend_models(argv[1], argv[2]);
  out("== failures: %d", compat::failures());
  return compat::failures() == 0 ? 0 : 1;
}
