// Generates the op classes of org.blockrnn.op.nn from the library's op table (blockrnn/ops.h),
// as TF-Java generates its org.tensorflow.op.* classes from TensorFlow's op definitions: one
// class per op, with a factory `create(...)` taking the inputs in the op's order, the required
// attrs, then `Options...` for the attrs with defaults, and one accessor per output. The build
// runs it before compiling the jar (java/CMakeLists.txt); nothing it writes is committed.
//
// Usage: blockrnn_java_opgen OUT_DIR FILE_LIST
//   writes OUT_DIR/org/blockrnn/op/nn/<Class>.java and FILE_LIST, the written files' paths one
//   per line (a javac @-file).
//
// Only the Java names and the prose live here (kClasses, kAttrDocs); inputs, attrs, defaults and
// outputs come from list_ops(). An op the table does not name, or a name the library does not
// have, stops the build: a new op gets a reviewed Java name (BlockLSTM/BlockLSTMV1 show why).
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "blockrnn/ops.h"

namespace {

using blockrnn::AttrDef;
using blockrnn::AttrKind;
using blockrnn::OpDef;

// The Java face of one op.
struct JavaClass {
  const char* op;       // the library's (TensorFlow's) op name
  const char* name;     // the Java class
  const char* tf_java;  // TF-Java's class for the same op, or nullptr when it has none
  const char* summary;  // the class's first javadoc paragraph
};

constexpr JavaClass kClasses[] = {
    {"GRUBlockCell", "GRUBlockCell", "GRUBlockCell",
     "One step of TensorFlow's GRU block cell (gate layout [r | u])."},
    {"GRUBlockCellGrad", "GRUBlockCellGrad", "GRUBlockCellGrad",
     "The GRU block cell's backward kernel: gradients with respect to x, hPrev and the gate "
     "pre-activations."},
    {"LSTMBlockCell", "LSTMBlockCell", "LSTMBlockCell",
     "One step of TensorFlow's LSTM block cell. Gate layout of w and b: ICFO = [i | ci | f | o]."},
    {"LSTMBlockCellGrad", "LSTMBlockCellGrad", "LSTMBlockCellGrad",
     "The LSTM block cell's backward kernel (ICFO)."},
    {"BlockLSTM", "BlockLSTMV1", nullptr,
     "TensorFlow's original BlockLSTM (V1) over a whole sequence: gate layout ICFO = "
     "[i | ci | f | o], forget_bias 1 and cell_clip 3 by default. TF-Java has no class for it."},
    {"BlockLSTMGrad", "BlockLSTMGradV1", nullptr,
     "The gradient of {@link BlockLSTMV1}: TensorFlow's BlockLSTMGrad (ICFO)."},
    {"BlockLSTMV2", "BlockLSTM", "BlockLSTM",
     "TensorFlow's BlockLSTMV2 over a whole sequence, as TF-Java's {@code BlockLSTM} wraps it: "
     "gate layout IFCO = [i | f | ci | o], no forget bias, cell_clip 0 (off) by default. For the "
     "V1 op (ICFO, forget_bias) use {@link BlockLSTMV1}."},
    {"BlockLSTMGradV2", "BlockLSTMGrad", "BlockLSTMGrad",
     "The gradient of {@link BlockLSTM}: TensorFlow's BlockLSTMGradV2 (IFCO), as TF-Java's "
     "{@code BlockLSTMGrad} wraps it."},
    {"BlockGRU", "BlockGRU", nullptr,
     "blockrnn's BlockGRU: GRUBlockCell over a whole sequence (x is [T, B, I]; outputs "
     "[T, B, H]). TensorFlow has no such op (tensorflow#22460)."},
    {"BlockGRUGrad", "BlockGRUGrad", nullptr, "The gradient of {@link BlockGRU}."},
    {"BlockGRUResetAfter", "BlockGRUResetAfter", nullptr,
     "blockrnn's reset-after GRU over a whole sequence: the GRU of PyTorch's {@code nn.GRU}, "
     "cuDNN and Keras' {@code GRU(reset_after=True)}, with two bias sets; the column blocks of "
     "w_i, w_h, b_i and b_h are in PyTorch's gate order [r | z | n] (output u is PyTorch's z). "
     "Not a TensorFlow op."},
    {"BlockGRUResetAfterGrad", "BlockGRUResetAfterGrad", nullptr,
     "The gradient of {@link BlockGRUResetAfter}."},
};

// What each attr means (javadoc); its default comes from the op definition.
struct AttrDoc {
  const char* name;
  const char* doc;
};
constexpr AttrDoc kAttrDocs[] = {
    {"forget_bias", "added to the forget gate's pre-activation"},
    {"cell_clip",
     "when positive, the cell state is clipped to [-cell_clip, cell_clip]; 0, a negative value "
     "or NaN disables clipping"},
    {"use_peephole", "whether the cell has peephole connections (wci, wcf, wco)"},
};

// Inputs that are not tensors of the op's float type.
constexpr std::string_view kSeqLenMax = "seq_len_max";   // a Java long
constexpr std::string_view kSeqLengths = "seq_lengths";  // a LongTensor

// Java's keywords, and the names the generated code uses itself: no input, attr or output may
// take one.
constexpr const char* kReserved[] = {
    "abstract", "assert",     "boolean",  "break",        "byte",     "case",
    "catch",    "char",       "class",    "const",        "continue", "default",
    "do",       "double",     "else",     "enum",         "extends",  "final",
    "finally",  "float",      "for",      "goto",         "if",       "implements",
    "import",   "instanceof", "int",      "interface",    "long",     "native",
    "new",      "package",    "private",  "protected",    "public",   "return",
    "short",    "static",     "strictfp", "super",        "switch",   "synchronized",
    "this",     "throw",      "throws",   "transient",    "try",      "void",
    "volatile", "while",      "var",      "record",       "yield",    "create",
    "attrs",    "options",    "outputs",  "requiredAttrs"};

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error(message);
}

// TensorFlow's snake_case name as a Java identifier: "d_r_bar_u_bar" -> "dRBarUBar".
std::string camel(const std::string& op, const std::string& name) {
  std::string out;
  bool upper = false;
  for (char ch : name) {
    if (ch == '_') {
      upper = true;
    } else {
      out += upper && ch >= 'a' && ch <= 'z' ? char(ch - 'a' + 'A') : ch;
      upper = false;
    }
  }
  for (const char* k : kReserved) {
    if (out == k) fail(op + ": name '" + name + "' is a Java keyword or a generated name");
  }
  return out;
}

// Words wrapped at 100 columns: the first line starts with `first`, the others with `rest`.
std::string wrap(const std::string& first, const std::string& rest, const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> words;
  for (std::string word; stream >> word;) {
    // A javadoc inline tag ({@code a b}) stays on one line.
    const bool open = !words.empty() && words.back().find("{@") != std::string::npos &&
                      words.back().find('}', words.back().rfind("{@")) == std::string::npos;
    if (open) {
      words.back() += " " + word;
    } else {
      words.push_back(word);
    }
  }
  std::string out = first;
  std::size_t column = first.size();
  bool line_empty = true;
  for (const std::string& word : words) {
    if (!line_empty && column + 1 + word.size() > 100) {
      out += "\n" + rest;
      column = rest.size();
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    line_empty = false;
  }
  return out + "\n";
}

std::string javadoc_block(const std::string& indent, const std::vector<std::string>& paragraphs,
                          const std::vector<std::string>& tags) {
  std::string out = indent + "/**\n";
  for (std::size_t k = 0; k < paragraphs.size(); ++k) {
    if (k > 0) out += indent + " *\n";
    out += wrap(indent + " * ", indent + " * ", paragraphs[k]);
  }
  if (!tags.empty()) out += indent + " *\n";
  for (const std::string& tag : tags) out += wrap(indent + " * ", indent + " *     ", tag);
  return out + indent + " */\n";
}

std::string attr_doc(const AttrDef& a) {
  for (const AttrDoc& d : kAttrDocs) {
    if (a.name == d.name) return d.doc;
  }
  return "the {@code " + a.name + "} attr";
}

std::string attr_type(const AttrDef& a) {
  return a.kind == AttrKind::kBool ? "Boolean" : "Float";
}

std::string default_text(const AttrDef& a) {
  if (a.kind == AttrKind::kBool) return a.default_value != 0.0 ? "true" : "false";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", a.default_value);
  return buf;
}

// One generated class.
class Generator {
 public:
  Generator(const OpDef& def, const JavaClass& java) : def_(def), java_(java) {
    for (const AttrDef& a : def.attrs) (a.has_default ? optional_ : required_).push_back(&a);
  }

  std::string source() const {
    std::string s = "// Generated by java/generator/generate_ops.cc from the op definition of " +
                    def_.name + ". Do not edit.\n";
    s += "package org.blockrnn.op.nn;\n\n";
    if (!optional_.empty()) s += "import java.util.LinkedHashMap;\n";
    s += "import java.util.Map;\n";
    if (has_seq_lengths()) s += "import org.blockrnn.LongTensor;\n";
    s += "import org.blockrnn.RawOps;\nimport org.blockrnn.Tensor;\n\n";
    s += class_doc();
    s += "public final class " + cls() + "<T extends Tensor> {\n";
    s += "  /** The name of the op this class runs. */\n";
    s += "  public static final String OP_NAME = \"" + def_.name + "\";\n\n";
    for (const std::string& o : def_.outputs)
      s += "  private final T " + camel(def_.name, o) + ";\n";
    s += "\n  @SuppressWarnings(\"unchecked\")\n";
    s += "  private " + cls() + "(Tensor[] outputs) {\n";
    for (std::size_t k = 0; k < def_.outputs.size(); ++k) {
      s += "    " + camel(def_.name, def_.outputs[k]) + " = (T) outputs[" + std::to_string(k) +
           "];\n";
    }
    s += "  }\n";
    const std::size_t required = def_.inputs.size() - std::size_t(def_.num_optional_inputs);
    // Members, one blank line apart.
    std::vector<std::string> members;
    for (std::size_t n = required; n <= def_.inputs.size(); ++n) members.push_back(factory(n));
    if (!required_.empty()) members.push_back(required_attrs());
    if (!optional_.empty()) {
      members.push_back(options_to_attrs());
      for (const AttrDef* a : optional_) members.push_back(static_option(*a));
    }
    for (const std::string& o : def_.outputs) members.push_back(accessor(o));
    if (!optional_.empty()) members.push_back(options_class());
    for (const std::string& m : members) {
      s += '\n';
      s += m;
    }
    return s + "}\n";
  }

  std::string cls() const { return java_.name; }

 private:
  bool has_seq_lengths() const {
    for (const std::string& in : def_.inputs) {
      if (in == kSeqLengths) return true;
    }
    return false;
  }

  std::string class_doc() const {
    std::string shaped = java_.tf_java != nullptr
                             ? "Shaped like TF-Java's {@code org.tensorflow.op.nn." +
                                   std::string(java_.tf_java) + "} without the {@code Scope}"
                             : "Shaped like TF-Java's op classes without the {@code Scope}";
    std::vector<std::string> paragraphs = {
        java_.summary,
        "<p>Runs the op {@code " + def_.name + "} (docs/ops.md). " + shaped +
            ": the factory runs the op at once and the accessors return its outputs."};
    if (!optional_.empty()) {
      paragraphs.push_back(
          "<p>Attrs with a default are set through {@link Options} (static on the class and "
          "chainable, as in TF-Java); one not set takes the op definition's default.");
    }
    if (has_seq_lengths()) {
      paragraphs.push_back(
          "<p>A second factory also takes {@code seq_lengths}, blockrnn's optional per-example "
          "lengths (an int64 {@link LongTensor} of shape [B], not a TensorFlow input): example b "
          "runs min(seqLengths[b], seqLenMax) steps; its steps past them give zero outputs and "
          "carry no gradient (docs/ops.md, \"Per-example lengths\").");
    }
    return javadoc_block("", paragraphs,
                         {"@param <T> the tensor type of inputs and outputs ({@link "
                          "org.blockrnn.FloatTensor} or {@link org.blockrnn.DoubleTensor})"});
  }

  // The factory taking the first `n` inputs (the trailing optional ones omitted).
  std::string factory(std::size_t n) const {
    std::vector<std::string> params, tags, args;
    std::string seq = "null";
    for (std::size_t k = 0; k < n; ++k) {
      const std::string& in = def_.inputs[k];
      const std::string name = camel(def_.name, in);
      if (in == kSeqLenMax) {
        if (k != 0) fail(def_.name + ": seq_len_max must be the first input");
        params.push_back("long " + name);
        tags.push_back("@param " + name +
                       " the number of steps to run, in [0, T]; outputs past it are zero");
        seq = name;
        continue;
      }
      if (in == kSeqLengths) {
        if (k < def_.inputs.size() - std::size_t(def_.num_optional_inputs))
          fail(def_.name + ": seq_lengths must be an optional input");
        params.push_back("LongTensor " + name);
        tags.push_back("@param " + name +
                       " blockrnn's per-example lengths, int64 [B], each in [0, T] (see the "
                       "class comment)");
      } else {
        params.push_back("T " + name);
        tags.push_back("@param " + name + " input {@code " + in + "}");
      }
      args.push_back(name);
    }
    for (const AttrDef* a : required_) {
      const std::string name = camel(def_.name, a->name);
      params.push_back(attr_type(*a) + " " + name);
      tags.push_back("@param " + name + " " + attr_doc(*a) +
                     " (required, as in TensorFlow: the op definition has no default)");
    }
    std::string attrs = "Map.of()";
    if (!optional_.empty()) {
      params.push_back("Options... options");
      std::string names;
      for (const AttrDef* a : optional_)
        names +=
            std::string(names.empty() ? "" : ", ") + "{@link #" + camel(def_.name, a->name) + "}";
      tags.push_back("@param options optional attributes: " + names);
      attrs = "attrs(options)";
    }
    if (!required_.empty()) {
      std::string names;
      for (const AttrDef* a : required_) names += ", " + camel(def_.name, a->name);
      attrs = "requiredAttrs(" + (optional_.empty() ? "new java.util.HashMap<>()" : attrs) + names +
              ")";
    }
    tags.push_back("@param <T> the tensor type");
    tags.push_back("@return the op with its outputs computed");
    tags.push_back(
        "@throws IllegalArgumentException when an input is null or has the wrong shape or type "
        "(the message names the argument)");
    const bool lengths = n > 0 && def_.inputs[n - 1] == kSeqLengths;
    std::string s = javadoc_block(
        "  ", {"Runs {@code " + def_.name + "}" + (lengths ? " with per-example lengths." : ".")},
        tags);
    s += "  public static <T extends Tensor> " + cls() + "<T> create(\n";
    s += wrap("      ", "      ", join(params) + ") {");
    s += "    Tensor[] outputs =\n";
    s += wrap("        ", "            ",
              "RawOps.run(OP_NAME, " + seq + ", " + attrs + ", " + join(args) + ");");
    s += "    return new " + cls() + "<>(outputs);\n  }\n";
    return s;
  }

  // Puts the required attrs into `attrs`, refusing null.
  std::string required_attrs() const {
    std::vector<std::string> params = {"Map<String, Object> attrs"};
    for (const AttrDef* a : required_)
      params.push_back(attr_type(*a) + " " + camel(def_.name, a->name));
    std::string s = "  private static Map<String, Object> requiredAttrs(\n";
    s += wrap("      ", "      ", join(params) + ") {");
    for (const AttrDef* a : required_) {
      const std::string name = camel(def_.name, a->name);
      s += "    if (" + name + " == null) {\n";
      s += "      throw new IllegalArgumentException(OP_NAME + \": " + a->name +
           " is null (it is required)\");\n";
      s += "    }\n";
      s += "    attrs.put(\"" + a->name + "\", " + name + ");\n";
    }
    return s + "    return attrs;\n  }\n";
  }

  std::string options_to_attrs() const {
    return "  private static Map<String, Object> attrs(Options... options) {\n"
           "    Map<String, Object> attrs = new java.util.HashMap<>();\n"
           "    if (options != null) {\n"
           "      for (Options option : options) {\n"
           "        if (option != null) {\n"
           "          attrs.putAll(option.attrs);\n"
           "        }\n"
           "      }\n"
           "    }\n"
           "    return attrs;\n"
           "  }\n";
  }

  std::string option_doc(const AttrDef& a) const {
    return "Sets the {@code " + a.name + "} attr: " + attr_doc(a) + " (default " + default_text(a) +
           ").";
  }

  std::string static_option(const AttrDef& a) const {
    const std::string name = camel(def_.name, a.name);
    std::string s =
        javadoc_block("  ", {option_doc(a)},
                      {"@param " + name + " the value", "@return a new Options holding it"});
    s += "  public static Options " + name + "(" + attr_type(a) + " " + name + ") {\n";
    return s + "    return new Options()." + name + "(" + name + ");\n  }\n";
  }

  std::string accessor(const std::string& output) const {
    const std::string name = camel(def_.name, output);
    std::string s = javadoc_block("  ", {"Output {@code " + output + "}."}, {"@return the tensor"});
    return s + "  public T " + name + "() {\n    return " + name + ";\n  }\n";
  }

  std::string options_class() const {
    std::string s = "  /** Optional attributes of {@link " + cls() +
                    "}; unset ones take the op definition's default. */\n";
    s += "  public static final class Options {\n";
    s += "    private final Map<String, Object> attrs = new LinkedHashMap<>();\n\n";
    s += "    private Options() {}\n";
    for (const AttrDef* a : optional_) {
      const std::string name = camel(def_.name, a->name);
      s += '\n';
      s += javadoc_block("    ", {option_doc(*a)},
                         {"@param " + name + " the value (null leaves the default)",
                          "@return this Options instance"});
      s += "    public Options " + name + "(" + attr_type(*a) + " " + name + ") {\n";
      s += "      if (" + name + " == null) {\n";
      s += "        attrs.remove(\"" + a->name + "\");\n";
      s += "      } else {\n";
      s += "        attrs.put(\"" + a->name + "\", " + name + ");\n";
      s += "      }\n";
      s += "      return this;\n    }\n";
    }
    return s + "  }\n";
  }

  static std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
    return out;
  }

  const OpDef& def_;
  const JavaClass& java_;
  std::vector<const AttrDef*> required_, optional_;
};

// The ops that get a class: all but the "gradients.*" ones (the parameter gradients TensorFlow
// computes in Python), which run by name through RawOps.run.
bool has_class(const OpDef& def) {
  return def.name.find('.') == std::string::npos;
}

const JavaClass& java_class_of(const OpDef& def) {
  for (const JavaClass& c : kClasses) {
    if (def.name == c.op) return c;
  }
  fail("op " + def.name +
       " has no Java class: add it to kClasses in java/generator/generate_ops.cc");
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) fail("cannot write " + path.string());
}

int run(const std::filesystem::path& out_dir, const std::filesystem::path& file_list) {
  const std::filesystem::path package = out_dir / "org" / "blockrnn" / "op" / "nn";
  std::filesystem::remove_all(package);  // no stale class of a renamed op
  std::filesystem::create_directories(package);
  std::set<std::string> ops;
  std::string list;
  for (const OpDef& def : blockrnn::list_ops()) {
    if (!has_class(def)) continue;
    const Generator gen(def, java_class_of(def));
    const std::filesystem::path path = package / (gen.cls() + ".java");
    write_file(path, gen.source());
    list += "\"" + std::filesystem::absolute(path).generic_string() + "\"\n";
    ops.insert(def.name);
  }
  for (const JavaClass& c : kClasses) {
    if (ops.count(c.op) == 0)
      fail(std::string("kClasses names op ") + c.op + ", which the library does not have");
  }
  write_file(file_list, list);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR FILE_LIST\n", argv[0]);
    return 2;
  }
  try {
    return run(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "blockrnn_java_opgen: %s\n", e.what());
    return 1;
  }
}
