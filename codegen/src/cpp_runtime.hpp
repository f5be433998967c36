// Runtime of the message classes: errors, the start-up check, in-place reads of the Rust
// representations, and the repeated-field classes. Copied into include/onnx_light.hpp by the
// code generator (codegen/src/cpp_classes.rs).
//@CUT@
/// An error of the library: the C status and the message of onnxl_last_error_message().
class Error : public std::runtime_error {
 public:
  Error(OnnxlStatus status, const std::string& message) : std::runtime_error(message), status_(status) {}
  /// The C status (ONNXL_STATUS_*).
  OnnxlStatus status() const noexcept { return status_; }

 private:
  OnnxlStatus status_;
};

namespace detail {
inline std::string last_error() {
  return std::string(onnxl_last_error_message(), onnxl_last_error_message_length());
}
inline void check(OnnxlStatus status) {
  if (status != ONNXL_STATUS_OK) {
    throw Error(status, std::string(onnxl_status_name(status)) + ": " + last_error());
  }
}
template <class T>
T* check_ptr(T* p) {
  if (p == nullptr) {
    OnnxlStatus status = onnxl_last_error_status();
    if (status == ONNXL_STATUS_OK) {
      status = ONNXL_STATUS_INTERNAL;
    }
    throw Error(status, std::string(onnxl_status_name(status)) + ": " + last_error());
  }
  return p;
}

// In-place reads and writes of the Rust representations (memcpy: no aliasing assumptions).
template <class T>
inline T load(const void* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(void* p, const T& v) noexcept {
  std::memcpy(p, &v, sizeof v);
}
inline const unsigned char* at(const void* base, std::size_t offset) noexcept {
  return static_cast<const unsigned char*>(base) + offset;
}
inline unsigned char* at(void* base, std::size_t offset) noexcept {
  return static_cast<unsigned char*>(base) + offset;
}

// The std::string functions the library uses to make and read the strings it hands out.
extern "C" inline void* string_create(const uint8_t* data, std::size_t len) {
  return new std::string(reinterpret_cast<const char*>(data), len);
}
extern "C" inline void string_destroy(void* s) { delete static_cast<std::string*>(s); }
extern "C" inline void string_assign(void* s, const uint8_t* data, std::size_t len) {
  static_cast<std::string*>(s)->assign(reinterpret_cast<const char*>(data), len);
}
extern "C" inline uint8_t* string_data(const void* s) {
  return reinterpret_cast<uint8_t*>(const_cast<char*>(static_cast<const std::string*>(s)->data()));
}
extern "C" inline std::size_t string_size(const void* s) { return static_cast<const std::string*>(s)->size(); }
/// `s` made `len` bytes long, its bytes written in order by `read(ctx, dst, n)` (a payload read
/// from a stream): no zero fill first (C++23's `resize_and_overwrite`; before C++23, appended
/// from a buffer that stays in cache). False when the string could not grow or a read failed.
extern "C" inline bool string_fill(void* s, std::size_t len, bool (*read)(void* ctx, uint8_t* dst, std::size_t n),
                                   void* ctx) {
  try {
    std::string* str = static_cast<std::string*>(s);
#if defined(__cpp_lib_string_resize_and_overwrite)
    bool ok = true;
    str->resize_and_overwrite(len, [&](char* p, std::size_t n) {
      ok = read(ctx, reinterpret_cast<uint8_t*>(p), n);
      return ok ? n : 0;
    });
    return ok;
#else
    str->clear();
    str->reserve(len);
    const std::size_t piece = std::min<std::size_t>(len, std::size_t(64) << 10);
    std::unique_ptr<uint8_t[]> buf(new uint8_t[piece]);
    while (str->size() < len) {
      const std::size_t n = std::min(piece, len - str->size());
      if (!read(ctx, buf.get(), n)) return false;
      str->append(reinterpret_cast<const char*>(buf.get()), n);
    }
    return true;
#endif
  } catch (...) {
    return false;
  }
}

/// Registers the string functions and checks, once per program, that this header was generated
/// for the library it runs with (same message layouts); aborts otherwise.
inline bool init() noexcept {
  static const OnnxlCxxStringOps ops = {string_create, string_destroy, string_assign, string_data, string_size,
                                        string_fill};
  static const bool ok = onnxl_cxx_init(&ops, kLayoutFingerprint);
  if (!ok) {
    std::fprintf(stderr,
                 "onnx_light.hpp: this header was generated for another build of the onnx_light "
                 "library (layout fingerprint %llx, library %llx); rebuild against the installed "
                 "header\n",
                 static_cast<unsigned long long>(kLayoutFingerprint),
                 static_cast<unsigned long long>(onnxl_cxx_layout_fingerprint()));
    std::abort();
  }
  return ok;
}
inline const bool initialized = init();

inline const std::string& empty_string() noexcept {
  static const std::string empty;
  return empty;
}

/// Publishes `fresh` in a string's or payload's slot unless another thread did first, and
/// returns the std::string in the slot (the other's, when it won: `fresh` is deleted).
inline std::string* publish(std::string* const* slot, std::string* fresh) noexcept {
  std::string* expected = nullptr;
  if (__atomic_compare_exchange_n(const_cast<std::string**>(slot), &expected, fresh, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    return fresh;
  }
  delete fresh;
  return expected;
}
/// The std::string C++ reads a string through, in the slot at the end of the string: a field the
/// classes parsed or set holds its value there; for any other, the first read publishes a copy
/// of the value there and the value stays as it is (so concurrent const reads, and pointers into
/// the value taken before, are safe).
inline std::string* string_at(const void* s) {
  auto slot = reinterpret_cast<std::string* const*>(at(s, kStringSlotAt));
  std::string* p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (p != nullptr) {
    return p;
  }
  std::size_t n = 0;
  const uint8_t* d = onnxl_cxx_str_bytes(s, &n);
  return publish(slot, new std::string(reinterpret_cast<const char*>(d), n));
}
/// The std::string of a string element, for writes through it: the value moves into it (in
/// place already when the tag says so).
inline std::string* mutable_string_at(void* s) {
  if (*static_cast<const uint8_t*>(s) == kStringTagCxx) {
    return load<std::string*>(at(s, kStringSlotAt));
  }
  return static_cast<std::string*>(onnxl_cxx_str_mutable(s));
}
/// An optional string field: its std::string, or the empty string when unset.
inline const std::string& optional_string(const void* f) {
  if (*static_cast<const uint8_t*>(f) == kOptionalStringNone) {
    return empty_string();
  }
  return *string_at(f);
}
inline bool optional_string_has(const void* f) noexcept {
  return *static_cast<const uint8_t*>(f) != kOptionalStringNone;
}
/// A payload field (`raw_data`) as a std::string, published as `string_at` does.
inline const std::string& payload(const void* f) {
  auto slot = static_cast<std::string* const*>(onnxl_cxx_payload_slot(f));
  if (slot == nullptr) {
    return empty_string();
  }
  std::string* p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (p != nullptr) {
    return *p;
  }
  std::size_t n = 0;
  const uint8_t* d = onnxl_cxx_payload_bytes(f, &n);
  return *publish(slot, new std::string(reinterpret_cast<const char*>(d), n));
}

/// Optional scalars: a tag before the value (see the layout table).
template <class T>
struct OptionalScalar;
#define ONNXL_OPTIONAL_SCALAR(T, VALUE_AT, SOME)                                        \
  template <>                                                                           \
  struct OptionalScalar<T> {                                                            \
    static bool has(const void* f) noexcept { return *at(f, 0) == (SOME); }             \
    static T get(const void* f, T dflt) noexcept {                                      \
      return has(f) ? load<T>(at(f, VALUE_AT)) : dflt;                                  \
    }                                                                                   \
    static void set(void* f, T v) noexcept {                                            \
      std::memset(f, 0, VALUE_AT);                                                      \
      *at(f, 0) = (SOME);                                                               \
      store<T>(at(f, VALUE_AT), v);                                                     \
    }                                                                                   \
    static void clear(void* f) noexcept {                                               \
      std::memset(f, 0, VALUE_AT);                                                      \
      *at(f, 0) = kOptionalNone##VALUE_AT;                                              \
    }                                                                                   \
  };
ONNXL_OPTIONAL_SCALAR(int32_t, 4, kOptionalSome4)
ONNXL_OPTIONAL_SCALAR(float, 4, kOptionalSome4)
ONNXL_OPTIONAL_SCALAR(int64_t, 8, kOptionalSome8)
ONNXL_OPTIONAL_SCALAR(uint64_t, 8, kOptionalSome8)
ONNXL_OPTIONAL_SCALAR(double, 8, kOptionalSome8)
#undef ONNXL_OPTIONAL_SCALAR

/// Lists (the header of an InlineVec: a uint32_t length, a uint32_t capacity with the spilled
/// bit, then at offset 8 the inline elements or the heap pointer). At most 2^31 - 1 elements,
/// as protobuf's int-counted fields: the functions that add elements fail past it.
constexpr uint32_t kSpilled = uint32_t(1) << 31;
inline std::size_t list_len(const void* f) noexcept { return load<uint32_t>(f); }
inline void list_set_len(void* f, std::size_t n) noexcept { store<uint32_t>(f, static_cast<uint32_t>(n)); }
inline std::size_t list_capacity(const void* f) noexcept { return load<uint32_t>(at(f, 4)) & ~kSpilled; }
inline unsigned char* list_data(const void* f) noexcept {
  uint32_t cap = load<uint32_t>(at(f, 4));
  const unsigned char* d = at(f, 8);
  return (cap & kSpilled) ? load<unsigned char*>(d) : const_cast<unsigned char*>(d);
}
/// Throws the library's error (ONNXL_STATUS_LIMIT_EXCEEDED past 2^31 - 1 elements,
/// ONNXL_STATUS_OUT_OF_MEMORY) when a list could not grow.
inline void check_grown(bool ok) {
  if (!ok) check_ptr<void>(nullptr);
}

[[noreturn]] inline void out_of_range(const char* what, long long i, std::size_t size) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: index %lld out of range (size %zu)", what, i, size);
  throw std::out_of_range(buf);
}

/// A stream that cannot seek, in memory (ParseFromIstream): read in 64 KiB steps to its end.
class StreamBytes {
 public:
  void read(std::streambuf* sb) {
    for (;;) {
      reserve(size_ + 65536);
      const std::streamsize n = sb->sgetn(data_.get() + size_, static_cast<std::streamsize>(capacity_ - size_));
      if (n <= 0) break;
      size_ += static_cast<std::size_t>(n);
    }
  }
  const uint8_t* data() const noexcept { return reinterpret_cast<const uint8_t*>(data_.get()); }
  std::size_t size() const noexcept { return size_; }

 private:
  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    std::size_t cap = capacity_ == 0 ? n : std::max(n, capacity_ + capacity_ / 2);
    std::unique_ptr<char[]> bigger(new char[cap]);
    if (size_ != 0) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = cap;
  }
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

/// A seekable stream (a file), from its position to its end, read by the library in the ranges
/// a parse needs: the message structure, and each large tensor payload straight into its
/// std::string (so that no buffer of the whole stream is made, as protobuf reads a stream).
class StreamSource {
 public:
  /// False when the stream cannot seek.
  bool open(std::streambuf* sb) {
    sb_ = sb;
    start_ = sb->pubseekoff(0, std::ios::cur, std::ios::in);
    if (start_ == std::streampos(-1)) return false;
    const std::streampos end = sb->pubseekoff(0, std::ios::end, std::ios::in);
    if (end == std::streampos(-1) || end < start_ || sb->pubseekpos(start_, std::ios::in) != start_) return false;
    source_ = OnnxlCxxSource{&read, this, static_cast<uint64_t>(end - start_)};
    pos_ = 0;
    return true;
  }
  const OnnxlCxxSource* source() const noexcept { return &source_; }
  /// Whether the stream ends where it ended when opened (else it grew meanwhile).
  bool at_end() {
    return seek(source_.size) && std::char_traits<char>::eq_int_type(sb_->sgetc(), std::char_traits<char>::eof());
  }
  /// Back to where the stream was when opened.
  bool rewind() { return seek(0); }

 private:
  bool seek(uint64_t offset) {
    if (offset == pos_) return true;
    const std::streampos to = start_ + static_cast<std::streamoff>(offset);
    if (sb_->pubseekpos(to, std::ios::in) != to) return false;
    pos_ = offset;
    return true;
  }
  static bool read(void* ctx, uint64_t offset, uint8_t* dst, std::size_t len) {
    StreamSource* s = static_cast<StreamSource*>(ctx);
    try {
      if (!s->seek(offset)) return false;
      while (len > 0) {
        const std::size_t want = std::min<std::size_t>(len, std::size_t(1) << 30);
        const std::streamsize n = s->sb_->sgetn(reinterpret_cast<char*>(dst), static_cast<std::streamsize>(want));
        if (n <= 0) {
          s->pos_ = UINT64_MAX;  // (unknown: seek before the next read)
          return false;
        }
        dst += n;
        len -= static_cast<std::size_t>(n);
        s->pos_ += static_cast<uint64_t>(n);
      }
      return true;
    } catch (...) {  // (a stream buffer that throws: the parse fails)
      s->pos_ = UINT64_MAX;
      return false;
    }
  }
  std::streambuf* sb_ = nullptr;
  std::streampos start_;
  uint64_t pos_ = 0;
  OnnxlCxxSource source_{};
};

using ParseFn = bool (*)(void* m, const uint8_t* data, std::size_t len, bool merge, const OnnxlCxxSource* source);

/// ParseFromIstream of every message class: the stream from its position to its end, read in
/// the ranges the parse needs when it can seek (StreamSource; read whole again if it grew
/// meanwhile), else whole. Afterwards the stream is at its end with eofbit and failbit set, as
/// after protobuf's reads.
inline bool parse_istream(std::istream* in, void* m, ParseFn parse) {
  std::streambuf* sb = in->rdbuf();
  if (!in->good() || sb == nullptr) {
    in->setstate(std::ios::failbit);
    return false;
  }
  StreamSource source;
  if (source.open(sb)) {
    const bool ok = parse(m, nullptr, 0, false, source.source());
    if (source.at_end()) {
      in->setstate(std::ios::eofbit | std::ios::failbit);
      return ok;
    }
    if (!source.rewind()) {
      in->setstate(std::ios::badbit);
      return false;
    }
  }
  StreamBytes bytes;
  bytes.read(sb);
  in->setstate(std::ios::eofbit | std::ios::failbit);
  return parse(m, bytes.data(), bytes.size(), false, nullptr);
}

/// Serializing into std::string: the library asks once for room for the whole encoding.
struct Appender {
  std::string* out;
  std::size_t start;
  static uint8_t* grow(void* ctx, std::size_t size) {
    Appender* a = static_cast<Appender*>(ctx);
    a->out->resize(a->start + size);
    return reinterpret_cast<uint8_t*>(&(*a->out)[0]) + a->start;
  }
};

/// Serializing into a caller's array: fails (NULL) when the encoding does not fit.
struct FixedBuffer {
  uint8_t* data;
  std::size_t size;
  static uint8_t* take(void* ctx, std::size_t size) {
    FixedBuffer* b = static_cast<FixedBuffer*>(ctx);
    return size <= b->size ? b->data : nullptr;
  }
};

/// protobuf's text format of a message given by its schema name and encoding.
inline std::string debug_string(const char* message, const std::string& bytes, uint32_t style) {
  std::string out;
  Appender a{&out, 0};
  if (!onnxl_cxx_debug_string(message, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), style,
                              Appender::grow, &a)) {
    return std::string();
  }
  return out;
}

template <class M>
struct ListOps;  // per message: add / delete / swap / truncate / reserve of a repeated field.

/// Iterator over a repeated field whose elements are reached through `get(field, index)`.
template <class Field, class Elem>
class IndexIterator {
 public:
  using iterator_category = std::random_access_iterator_tag;
  using value_type = typename std::remove_const<Elem>::type;
  using difference_type = std::ptrdiff_t;
  using pointer = Elem*;
  using reference = Elem&;
  IndexIterator() noexcept : f_(nullptr), i_(0) {}
  IndexIterator(Field* f, std::ptrdiff_t i) noexcept : f_(f), i_(i) {}
  template <class F2, class E2,
            class = typename std::enable_if<std::is_convertible<F2*, Field*>::value>::type>
  IndexIterator(const IndexIterator<F2, E2>& o) noexcept : f_(o.field()), i_(o.index()) {}
  reference operator*() const { return f_->element(i_); }
  pointer operator->() const { return &f_->element(i_); }
  reference operator[](difference_type n) const { return f_->element(i_ + n); }
  IndexIterator& operator++() noexcept { ++i_; return *this; }
  IndexIterator operator++(int) noexcept { IndexIterator t = *this; ++i_; return t; }
  IndexIterator& operator--() noexcept { --i_; return *this; }
  IndexIterator operator--(int) noexcept { IndexIterator t = *this; --i_; return t; }
  IndexIterator& operator+=(difference_type n) noexcept { i_ += n; return *this; }
  IndexIterator& operator-=(difference_type n) noexcept { i_ -= n; return *this; }
  friend IndexIterator operator+(IndexIterator a, difference_type n) noexcept { return a += n; }
  friend IndexIterator operator+(difference_type n, IndexIterator a) noexcept { return a += n; }
  friend IndexIterator operator-(IndexIterator a, difference_type n) noexcept { return a -= n; }
  friend difference_type operator-(const IndexIterator& a, const IndexIterator& b) noexcept { return a.i_ - b.i_; }
  friend bool operator==(const IndexIterator& a, const IndexIterator& b) noexcept { return a.i_ == b.i_; }
  friend bool operator!=(const IndexIterator& a, const IndexIterator& b) noexcept { return a.i_ != b.i_; }
  friend bool operator<(const IndexIterator& a, const IndexIterator& b) noexcept { return a.i_ < b.i_; }
  friend bool operator>(const IndexIterator& a, const IndexIterator& b) noexcept { return a.i_ > b.i_; }
  friend bool operator<=(const IndexIterator& a, const IndexIterator& b) noexcept { return a.i_ <= b.i_; }
  friend bool operator>=(const IndexIterator& a, const IndexIterator& b) noexcept { return a.i_ >= b.i_; }
  Field* field() const noexcept { return f_; }
  std::ptrdiff_t index() const noexcept { return i_; }

 private:
  Field* f_;
  std::ptrdiff_t i_;
};
}  // namespace detail

/// A retained owner token (OnnxlOwner): keeps tensor bytes valid after their model is freed.
class Owner {
 public:
  /// Takes over one reference (may be NULL).
  explicit Owner(const OnnxlOwner* p) noexcept : p_(p) {}
  Owner(const Owner& o) noexcept : p_(o.p_ ? onnxl_owner_retain(o.p_) : nullptr) {}
  Owner(Owner&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Owner& operator=(Owner o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Owner() { onnxl_owner_release(p_); }
  /// The bytes the token was taken for.
  std::string_view bytes() const {
    const uint8_t* data = nullptr;
    std::size_t len = 0;
    detail::check(onnxl_owner_data(p_, &data, &len));
    return std::string_view(reinterpret_cast<const char*>(data), len);
  }
  const OnnxlOwner* c_ptr() const noexcept { return p_; }
  /// Gives up the reference (the caller releases it with onnxl_owner_release).
  const OnnxlOwner* release() noexcept { return std::exchange(p_, nullptr); }

 private:
  const OnnxlOwner* p_;
};

/// A repeated numeric or enum field (protobuf's RepeatedField<T>): the field itself, inside its
/// message (reached through x() / mutable_x(); not constructible on its own).
template <class T>
class RepeatedField {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "scalar elements only");

 public:
  using value_type = T;
  using size_type = int;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  RepeatedField(const RepeatedField&) = delete;
  /// Replaces the elements with a copy of `o`'s.
  RepeatedField& operator=(const RepeatedField& o) {
    if (this != &o) CopyFrom(o);
    return *this;
  }

  int size() const noexcept { return static_cast<int>(detail::list_len(this)); }
  bool empty() const noexcept { return size() == 0; }
  int Capacity() const noexcept { return static_cast<int>(detail::list_capacity(this)); }
  const T* data() const noexcept { return reinterpret_cast<const T*>(detail::list_data(this)); }
  T* mutable_data() noexcept { return reinterpret_cast<T*>(detail::list_data(this)); }
  const T& Get(int i) const { return data()[check(i)]; }
  T* Mutable(int i) { return mutable_data() + check(i); }
  const T& operator[](int i) const { return Get(i); }
  T& operator[](int i) { return *Mutable(i); }
  const T& at(int i) const { return Get(i); }
  T& at(int i) { return *Mutable(i); }
  void Set(int i, const T& v) { *Mutable(i) = v; }
  void Add(const T& v) { push(v); }
  /// Appends a zero element and returns it.
  T* Add() {
    push(T());
    return mutable_data() + size() - 1;
  }
  template <class It>
  void Add(It first, It last) {
    for (; first != last; ++first) push(static_cast<T>(*first));
  }
  void Reserve(int n) {
    if (n > size()) reserve(static_cast<std::size_t>(n - size()));
  }
  void Resize(int n, const T& v) {
    if (n < size()) {
      Truncate(n);
    } else {
      Reserve(n);
      while (size() < n) push(v);
    }
  }
  void Truncate(int n) {
    if (n < size()) detail::list_set_len(this, static_cast<std::size_t>(n < 0 ? 0 : n));
  }
  void RemoveLast() {
    if (empty()) detail::out_of_range("RepeatedField::RemoveLast", 0, 0);
    detail::list_set_len(this, detail::list_len(this) - 1);
  }
  void Clear() noexcept { detail::list_set_len(this, 0); }
  void SwapElements(int i, int j) { std::swap(*Mutable(i), *Mutable(j)); }
  /// Removes `num` elements from `start`; copies them to `out` first when it is not null.
  void ExtractSubrange(int start, int num, T* out) {
    if (start < 0 || num < 0 || start + num > size()) detail::out_of_range("RepeatedField::ExtractSubrange", start, detail::list_len(this));
    T* d = mutable_data();
    if (out) std::copy(d + start, d + start + num, out);
    std::copy(d + start + num, d + size(), d + start);
    Truncate(size() - num);
  }
  void CopyFrom(const RepeatedField& o) {
    if (this == &o) return;
    Clear();
    MergeFrom(o);
  }
  void MergeFrom(const RepeatedField& o) {
    int n = o.size();
    reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) push(o.data()[i]);
  }

  iterator begin() noexcept { return mutable_data(); }
  iterator end() noexcept { return mutable_data() + size(); }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size(); }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

 private:
  RepeatedField() = delete;
  ~RepeatedField() = delete;
  std::size_t check(int i) const {
    if (i < 0 || i >= size()) detail::out_of_range("RepeatedField", i, detail::list_len(this));
    return static_cast<std::size_t>(i);
  }
  void push(T v) {
    if (sizeof(T) == 4) {
      detail::check_grown(onnxl_cxx_scalars32_add(this, detail::load<uint32_t>(&v)));
    } else {
      detail::check_grown(onnxl_cxx_scalars64_add(this, detail::load<uint64_t>(&v)));
    }
  }
  void reserve(std::size_t n) {
    if (sizeof(T) == 4) {
      detail::check_grown(onnxl_cxx_scalars32_reserve(this, n));
    } else {
      detail::check_grown(onnxl_cxx_scalars64_reserve(this, n));
    }
  }
};

template <class T>
class RepeatedPtrField;

/// A repeated string or bytes field (protobuf's RepeatedPtrField<std::string>): elements are
/// std::string, each made the first time C++ asks for it and kept at the same address until
/// it is removed.
template <>
class RepeatedPtrField<std::string> {
 public:
  using value_type = std::string;
  using size_type = int;
  using difference_type = std::ptrdiff_t;
  using reference = std::string&;
  using const_reference = const std::string&;
  using iterator = detail::IndexIterator<RepeatedPtrField, std::string>;
  using const_iterator = detail::IndexIterator<const RepeatedPtrField, const std::string>;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  RepeatedPtrField(const RepeatedPtrField&) = delete;
  RepeatedPtrField& operator=(const RepeatedPtrField& o) {
    if (this != &o) CopyFrom(o);
    return *this;
  }

  int size() const noexcept { return static_cast<int>(detail::list_len(this)); }
  bool empty() const noexcept { return size() == 0; }
  const std::string& Get(int i) const { return *detail::string_at(slot(check(i))); }
  std::string* Mutable(int i) { return detail::mutable_string_at(slot(check(i))); }
  const std::string& operator[](int i) const { return Get(i); }
  std::string& operator[](int i) { return *Mutable(i); }
  const std::string& at(int i) const { return Get(i); }
  std::string& at(int i) { return *Mutable(i); }
  /// Appends an empty string and returns it.
  std::string* Add() { return detail::mutable_string_at(push("", 0)); }
  void Add(const std::string& v) { push(v.data(), v.size()); }
  void Add(std::string&& v) { push(v.data(), v.size()); }
  void Add(const char* v) { push(v, std::strlen(v)); }
  template <class It>
  void Add(It first, It last) {
    for (; first != last; ++first) Add(*first);
  }
  void Set(int i, const std::string& v) { onnxl_cxx_str_set(slot(check(i)), reinterpret_cast<const uint8_t*>(v.data()), v.size()); }
  void Reserve(int n) {
    if (n > size()) detail::check_grown(onnxl_cxx_strs_reserve(this, static_cast<std::size_t>(n - size())));
  }
  void RemoveLast() {
    if (empty()) detail::out_of_range("RepeatedPtrField::RemoveLast", 0, 0);
    onnxl_cxx_strs_truncate(this, detail::list_len(this) - 1);
  }
  void Clear() noexcept { onnxl_cxx_strs_truncate(this, 0); }
  void DeleteSubrange(int start, int num) {
    if (start < 0 || num < 0 || start + num > size()) detail::out_of_range("RepeatedPtrField::DeleteSubrange", start, detail::list_len(this));
    onnxl_cxx_strs_delete(this, static_cast<std::size_t>(start), static_cast<std::size_t>(num));
  }
  void SwapElements(int i, int j) {
    unsigned char tmp[detail::kStringSize];
    void* a = slot(check(i));
    void* b = slot(check(j));
    std::memcpy(tmp, a, detail::kStringSize);
    std::memcpy(a, b, detail::kStringSize);
    std::memcpy(b, tmp, detail::kStringSize);
  }
  void CopyFrom(const RepeatedPtrField& o) {
    if (this == &o) return;
    Clear();
    MergeFrom(o);
  }
  void MergeFrom(const RepeatedPtrField& o) {
    int n = o.size();
    detail::check_grown(onnxl_cxx_strs_reserve(this, static_cast<std::size_t>(n)));
    for (int i = 0; i < n; ++i) Add(o.Get(i));
  }

  iterator begin() noexcept { return iterator(this, 0); }
  iterator end() noexcept { return iterator(this, size()); }
  const_iterator begin() const noexcept { return const_iterator(this, 0); }
  const_iterator end() const noexcept { return const_iterator(this, size()); }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  // Element access of the iterators.
  const std::string& element(std::ptrdiff_t i) const { return *detail::string_at(slot(static_cast<std::size_t>(i))); }
  std::string& element(std::ptrdiff_t i) { return *detail::mutable_string_at(slot(static_cast<std::size_t>(i))); }

 private:
  RepeatedPtrField() = delete;
  ~RepeatedPtrField() = delete;
  std::size_t check(int i) const {
    if (i < 0 || i >= size()) detail::out_of_range("RepeatedPtrField", i, detail::list_len(this));
    return static_cast<std::size_t>(i);
  }
  void* slot(std::size_t i) const noexcept { return detail::list_data(this) + i * detail::kStringSize; }
  void* push(const char* data, std::size_t len) {
    return detail::check_ptr(onnxl_cxx_strs_add(this, reinterpret_cast<const uint8_t*>(data), len));
  }
};

/// A repeated message field (protobuf's RepeatedPtrField<M>): elements keep their address while
/// they stay in the field.
template <class M>
class RepeatedPtrField {
 public:
  using value_type = M;
  using size_type = int;
  using difference_type = std::ptrdiff_t;
  using reference = M&;
  using const_reference = const M&;
  using iterator = detail::IndexIterator<RepeatedPtrField, M>;
  using const_iterator = detail::IndexIterator<const RepeatedPtrField, const M>;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  /// A standalone list (not a field of a message): empty, and owning its elements.
  RepeatedPtrField() noexcept {
    static_assert(sizeof(RepeatedPtrField) == detail::kRepeatedFieldSize && alignof(RepeatedPtrField) == 8,
                  "RepeatedPtrField<M> is exactly the Rust RepeatedField<M> (codegen/cxx_layout.txt)");
    detail::ListOps<M>::init(storage_);
  }
  /// A deep copy of `o`'s elements.
  RepeatedPtrField(const RepeatedPtrField& o) : RepeatedPtrField() { MergeFrom(o); }
  /// Takes `o`'s elements (they keep their addresses); `o` is left empty.
  RepeatedPtrField(RepeatedPtrField&& o) noexcept : RepeatedPtrField() { Swap(&o); }
  ~RepeatedPtrField() { detail::ListOps<M>::drop(storage_); }
  RepeatedPtrField& operator=(RepeatedPtrField&& o) noexcept {
    if (this != &o) Swap(&o);
    return *this;
  }
  RepeatedPtrField& operator=(const RepeatedPtrField& o) {
    if (this != &o) CopyFrom(o);
    return *this;
  }

  int size() const noexcept { return static_cast<int>(detail::load<std::size_t>(detail::at(this, detail::kRepeatedLenAt))); }
  bool empty() const noexcept { return size() == 0; }
  const M& Get(int i) const { return *ptr(check(i)); }
  M* Mutable(int i) { return ptr(check(i)); }
  const M& operator[](int i) const { return Get(i); }
  M& operator[](int i) { return *Mutable(i); }
  const M& at(int i) const { return Get(i); }
  M& at(int i) { return *Mutable(i); }
  /// Appends an empty message and returns it.
  M* Add() { return static_cast<M*>(detail::ListOps<M>::add(this)); }
  void Add(const M& v) { detail::ListOps<M>::add_copy(this, &v); }
  void Add(M&& v) { Add()->Swap(&v); }
  template <class It>
  void Add(It first, It last) {
    for (; first != last; ++first) Add(*first);
  }
  /// Takes a message made with new: its contents move into a new element (at another address)
  /// and `v` is deleted.
  void AddAllocated(M* v) {
    Add()->Swap(v);
    delete v;
  }
  /// Removes the last element and returns it as a new message the caller owns.
  M* ReleaseLast() {
    M* out = new M;
    out->Swap(Mutable(size() - 1));
    RemoveLast();
    return out;
  }
  void Reserve(int n) {
    if (n > size()) detail::ListOps<M>::reserve(this, static_cast<std::size_t>(n - size()));
  }
  void RemoveLast() {
    if (empty()) detail::out_of_range("RepeatedPtrField::RemoveLast", 0, 0);
    detail::ListOps<M>::truncate(this, static_cast<std::size_t>(size() - 1));
  }
  void Clear() { detail::ListOps<M>::truncate(this, 0); }
  void DeleteSubrange(int start, int num) {
    if (start < 0 || num < 0 || start + num > size()) detail::out_of_range("RepeatedPtrField::DeleteSubrange", start, static_cast<std::size_t>(size()));
    detail::ListOps<M>::erase(this, static_cast<std::size_t>(start), static_cast<std::size_t>(num));
  }
  /// Exchanges the contents of two lists (fields or standalone ones) in O(1); the elements keep
  /// their addresses. The list is a Rust value with no pointer into itself, so its bytes move.
  void Swap(RepeatedPtrField* o) noexcept {
    if (o == this) return;
    unsigned char tmp[sizeof storage_];
    std::memcpy(tmp, storage_, sizeof tmp);
    std::memcpy(storage_, o->storage_, sizeof tmp);
    std::memcpy(o->storage_, tmp, sizeof tmp);
  }
  void swap(RepeatedPtrField& o) noexcept { Swap(&o); }
  /// Removes the element at `pos`; returns an iterator to the element after it.
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  /// Removes [first, last); returns an iterator to the element after them.
  iterator erase(const_iterator first, const_iterator last) {
    int i = static_cast<int>(first.index());
    DeleteSubrange(i, static_cast<int>(last.index() - first.index()));
    return iterator(this, i);
  }
  void SwapElements(int i, int j) { detail::ListOps<M>::swap(this, check(i), check(j)); }
  void CopyFrom(const RepeatedPtrField& o) {
    if (this == &o) return;
    Clear();
    MergeFrom(o);
  }
  void MergeFrom(const RepeatedPtrField& o) {
    int n = o.size();
    Reserve(size() + n);
    for (int i = 0; i < n; ++i) Add(o.Get(i));
  }

  iterator begin() noexcept { return iterator(this, 0); }
  iterator end() noexcept { return iterator(this, size()); }
  const_iterator begin() const noexcept { return const_iterator(this, 0); }
  const_iterator end() const noexcept { return const_iterator(this, size()); }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  // Element access of the iterators.
  const M& element(std::ptrdiff_t i) const { return *ptr(static_cast<std::size_t>(i)); }
  M& element(std::ptrdiff_t i) { return *ptr(static_cast<std::size_t>(i)); }

 private:
  // The field's bytes: a Rust RepeatedField<M> (`repeated_field` in codegen/cxx_layout.txt). A
  // field of a message is this class laid over the field; a standalone list holds its own.
  alignas(8) unsigned char storage_[detail::kRepeatedFieldSize];
  std::size_t check(int i) const {
    if (i < 0 || i >= size()) detail::out_of_range("RepeatedPtrField", i, static_cast<std::size_t>(size()));
    return static_cast<std::size_t>(i);
  }
  M* ptr(std::size_t i) const noexcept {
    M* const* order = detail::load<M* const*>(detail::at(this, detail::kRepeatedOrderAt));
    return order[i];
  }
};

// protobuf's io streams, the subset that code reading a buffer into a message uses (onnx's
// ParseProtoFromBytes: ArrayInputStream -> CodedInputStream -> SetTotalBytesLimit ->
// ParseFromCodedStream). Aliased as google::protobuf::io in <onnx_light/onnx_pb.h>.
namespace io {
/// An input stream handing out its bytes in buffers it owns (protobuf's interface).
class ZeroCopyInputStream {
 public:
  virtual ~ZeroCopyInputStream() = default;
  virtual bool Next(const void** data, int* size) = 0;
  virtual void BackUp(int count) = 0;
  virtual bool Skip(int count) = 0;
  virtual int64_t ByteCount() const = 0;
};

/// A stream over a caller's buffer, in blocks of `block_size` bytes (the whole buffer when not
/// positive).
class ArrayInputStream final : public ZeroCopyInputStream {
 public:
  ArrayInputStream(const void* data, int size, int block_size = -1) noexcept
      : data_(static_cast<const char*>(data)),
        size_(size < 0 ? 0 : size),
        block_(block_size > 0 ? block_size : (size < 0 ? 0 : size)) {}
  ArrayInputStream(const ArrayInputStream&) = delete;
  ArrayInputStream& operator=(const ArrayInputStream&) = delete;
  bool Next(const void** data, int* size) override {
    if (pos_ >= size_) {
      last_ = 0;
      return false;
    }
    last_ = std::min(block_, size_ - pos_);
    *data = data_ + pos_;
    *size = last_;
    pos_ += last_;
    return true;
  }
  void BackUp(int count) override {
    pos_ -= std::min(count, last_);
    last_ = 0;
  }
  bool Skip(int count) override {
    last_ = 0;
    if (count > size_ - pos_) {
      pos_ = size_;
      return false;
    }
    pos_ += count;
    return true;
  }
  int64_t ByteCount() const override { return pos_; }

 private:
  const char* data_;
  int size_;
  int block_;
  int pos_ = 0;
  int last_ = 0;
};

/// A reader of a ZeroCopyInputStream or a buffer, with a total bytes limit (INT_MAX by
/// default). Messages read the rest of it with ParseFromCodedStream / MergeFromCodedStream.
/// Unlike protobuf, a message read fails when the input is longer than the limit, wherever the
/// limit falls (protobuf reads up to the limit and fails only when that cuts a field).
class CodedInputStream {
 public:
  explicit CodedInputStream(ZeroCopyInputStream* in) noexcept : in_(in) {}
  CodedInputStream(const uint8_t* buffer, int size) noexcept : buf_(buffer), buf_size_(size < 0 ? 0 : size) {}
  CodedInputStream(const CodedInputStream&) = delete;
  CodedInputStream& operator=(const CodedInputStream&) = delete;
  void SetTotalBytesLimit(int total_bytes_limit) noexcept { limit_ = total_bytes_limit; }
  /// protobuf before 3.11 (onnx's proto_utils.h uses it when GOOGLE_PROTOBUF_VERSION is not
  /// defined); the threshold is ignored.
  void SetTotalBytesLimit(int total_bytes_limit, int /*warning_threshold*/) noexcept { limit_ = total_bytes_limit; }
  int BytesUntilTotalBytesLimit() const noexcept { return limit_ - consumed_; }
  int CurrentPosition() const noexcept { return consumed_; }
  /// onnx_light: everything left, up to the total bytes limit, as one span (the caller's
  /// memory when the source is contiguous, else gathered into *scratch). false when the input
  /// is longer than the limit.
  bool ReadRest(const uint8_t** data, std::size_t* size, std::string* scratch) {
    *data = nullptr;
    *size = 0;
    if (buf_ != nullptr) {
      if (buf_size_ > limit_ - consumed_) return false;
      *data = buf_;
      *size = static_cast<std::size_t>(buf_size_);
      consumed_ += buf_size_;
      buf_ = nullptr;
      buf_size_ = 0;
      return true;
    }
    const void* p = nullptr;
    int n = 0;
    int chunks = 0;
    while (in_ != nullptr && in_->Next(&p, &n)) {
      if (n <= 0) continue;
      if (n > limit_ - consumed_) return false;
      consumed_ += n;
      if (chunks++ == 0) {
        *data = static_cast<const uint8_t*>(p);
        *size = static_cast<std::size_t>(n);
        continue;
      }
      if (chunks == 2) scratch->assign(reinterpret_cast<const char*>(*data), *size);
      scratch->append(static_cast<const char*>(p), static_cast<std::size_t>(n));
    }
    if (chunks > 1) {
      *data = reinterpret_cast<const uint8_t*>(scratch->data());
      *size = scratch->size();
    }
    return true;
  }

 private:
  ZeroCopyInputStream* in_ = nullptr;
  const uint8_t* buf_ = nullptr;
  int buf_size_ = 0;
  int limit_ = 2147483647;
  int consumed_ = 0;
};
}  // namespace io

/// protobuf's MessageLite, as a view: the message classes have no common base (a base with
/// virtual functions would move `this` off the Rust value), so any message converts implicitly
/// to a `const MessageLite&` / `const Message&` that forwards this const API to it. There is no
/// `Message*` conversion, no reflection and no dynamic_cast.
class MessageLite {
 public:
  template <class M, class = decltype(std::declval<const M&>().c_ptr()),
            class = decltype(std::declval<const M&>().ShortDebugString())>
  MessageLite(const M& m) noexcept  // NOLINT: implicit, as a derived-to-base conversion is
      : p_(&m),
        short_([](const void* p) { return static_cast<const M*>(p)->ShortDebugString(); }),
        debug_([](const void* p) { return static_cast<const M*>(p)->DebugString(); }),
        bytes_([](const void* p) { return static_cast<const M*>(p)->SerializeAsString(); }),
        name_([](const void* p) { return static_cast<const M*>(p)->GetTypeName(); }) {}
  std::string ShortDebugString() const { return short_(p_); }
  std::string DebugString() const { return debug_(p_); }
  std::string SerializeAsString() const { return bytes_(p_); }
  bool SerializeToString(std::string* out) const {
    *out = bytes_(p_);
    return true;
  }
  std::size_t ByteSizeLong() const { return bytes_(p_).size(); }
  std::string GetTypeName() const { return name_(p_); }
  bool IsInitialized() const { return true; }

 private:
  const void* p_;
  std::string (*short_)(const void*);
  std::string (*debug_)(const void*);
  std::string (*bytes_)(const void*);
  std::string (*name_)(const void*);
};

/// protobuf's Message, as a view (see MessageLite).
class Message : public MessageLite {
 public:
  using MessageLite::MessageLite;
};
