// The chat-template interpreter's evaluator (jinja.h): statements executed over a chain of scopes,
// expressions evaluated with jinja2's semantics, and the Template that parses and renders.
#include <set>

#include "tokenizer/jinja.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_builtins.h"

namespace tilellm::jinja {
namespace {

// Variables of one scope; lookups climb to the parent. The template's top level, each for-loop iteration and
// each macro call have their own.
struct Scope {
  Object vars;
  const Scope* parent = nullptr;
  const Value* find(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      for (const auto& [k, v] : s->vars) {
        if (k == n) return &v;
      }
    }
    return nullptr;
  }
  void set(const std::string& n, Value v) {
    for (auto& [k, old] : vars) {
      if (k == n) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(n, std::move(v));
  }
};

enum class Flow { Normal, Break, Continue };

// Filters and tests must exist when the template is parsed, as jinja2 checks them when it compiles.
void check_names(const Expr* e) {
  if (!e) return;
  if (e->kind == Expr::Kind::Filter && !has_filter(e->name))
    throw Unsupported("the filter '" + e->name + "'");
  if (e->kind == Expr::Kind::Test && !has_test(e->name)) throw Unsupported("the test '" + e->name + "'");
  check_names(e->a.get());
  check_names(e->b.get());
  check_names(e->c.get());
  for (const ExprPtr& x : e->items) check_names(x.get());
}

void check_names(const Body& body) {
  for (const auto& n : body) {
    check_names(n->expr.get());
    check_names(n->filter.get());
    for (const ExprPtr& c : n->conds) check_names(c.get());
    for (const ExprPtr& d : n->defaults) check_names(d.get());
    for (const Body& b : n->branches) check_names(b);
    check_names(n->body);
    check_names(n->else_body);
  }
}

class Interp {
  static constexpr int kMaxCalls = 100;
  int calls_ = 0;

 public:
  Flow exec(const Body& body, Scope& sc, std::string& out) {
    for (const auto& n : body) {
      const Flow f = exec(*n, sc, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Value eval(const Expr& e, const Scope& sc) {
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.value;
      case Expr::Kind::Name: {
        if (const Value* v = sc.find(e.name)) return *v;
        return global(e.name);
      }
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        Array a;
        for (const ExprPtr& x : e.items) a.push_back(eval(*x, sc));
        return Value(std::move(a), e.kind == Expr::Kind::Tuple);
      }
      case Expr::Kind::Dict: {
        Value d{Object{}};
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value k = eval(*e.items[i], sc);
          if (!k.is_string()) throw Unsupported("a dict literal with a key that is not a string");
          d.set(k.as_string(), eval(*e.items[i + 1], sc));
        }
        return d;
      }
      case Expr::Kind::Attr:
        return get_attr(named(*e.a, sc), e.name);
      case Expr::Kind::Index:
        return get_item(named(*e.a, sc), eval(*e.b, sc));
      case Expr::Kind::Slice: {
        auto part = [&](size_t i) { return e.items[i] ? eval(*e.items[i], sc) : Value(); };
        return slice(named(*e.a, sc), part(0), part(1), part(2));
      }
      case Expr::Kind::Call: {
        const Value f = eval(*e.a, sc);
        Args args = arguments(e, sc);
        if (f.is_undefined())
          throw TemplateError("line " + std::to_string(e.line) + ": " + describe(*e.a) +
                              " is undefined and cannot be called");
        if (!f.is_function()) throw TemplateError("'" + f.type_name() + "' object is not callable");
        return f.as_function()(args);
      }
      case Expr::Kind::Filter: {
        const Value v = eval(*e.a, sc);
        return call_filter(e.name, v, arguments(e, sc));
      }
      case Expr::Kind::Test: {
        const Value v = eval(*e.a, sc);
        return Value(call_test(e.name, v, arguments(e, sc)) != e.negate);
      }
      case Expr::Kind::Unary: {
        const Value v = eval(*e.a, sc);
        if (e.name == "not") return Value(!v.truthy());
        if (!v.is_number()) {
          if (v.is_undefined()) throw TemplateError("an undefined value used with the unary " + e.name);
          throw TemplateError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
        }
        if (e.name == "+") return v.is_float() ? Value(v.as_float()) : Value(v.as_int());
        return v.is_float() ? Value(-v.as_float()) : Value(-v.as_int());
      }
      case Expr::Kind::Binary: {
        const Value a = eval(*e.a, sc), b = eval(*e.b, sc);
        if (e.name == "~") return Value(to_str(a) + to_str(b));
        return arithmetic(e.name, a, b);
      }
      case Expr::Kind::And: {
        Value a = eval(*e.a, sc);
        return a.truthy() ? eval(*e.b, sc) : a;
      }
      case Expr::Kind::Or: {
        Value a = eval(*e.a, sc);
        return a.truthy() ? a : eval(*e.b, sc);
      }
      case Expr::Kind::Compare: {
        Value left = eval(*e.a, sc);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.items[i], sc);
          const std::string& op = e.ops[i];
          bool r;
          if (op == "==") {
            r = equals(left, right);
          } else if (op == "!=") {
            r = !equals(left, right);
          } else if (op == "in" || op == "notin") {
            r = contains(right, left) == (op == "in");
          } else {
            if (left.is_undefined() || right.is_undefined())
              throw TemplateError("an undefined value used with the operator '" + op + "'");
            r = op == "<"    ? less(left, right)
                : op == ">"  ? less(right, left)
                : op == "<=" ? !less(right, left)
                             : !less(left, right);
          }
          if (!r) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::Cond:
        if (eval(*e.a, sc).truthy()) return eval(*e.b, sc);
        return e.c ? eval(*e.c, sc) : Value();
    }
    return Value();
  }

 private:
  // What an expression names, for error messages ("messages[0]", "message.content").
  static std::string describe(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Name:
        return "'" + e.name + "'";
      case Expr::Kind::Attr:
        return describe(*e.a) + "." + e.name;
      default:
        return "a value";
    }
  }

  // The operand of an attribute, item or slice: an undefined one is an error naming it (jinja2's
  // UndefinedError).
  Value named(const Expr& e, const Scope& sc) {
    Value v = eval(e, sc);
    if (v.is_undefined()) {
      throw TemplateError("line " + std::to_string(e.line) + ": " + describe(e) + " is undefined");
    }
    return v;
  }

  Args arguments(const Expr& e, const Scope& sc) {
    Args a;
    const size_t n_pos = e.items.size() - e.kw_names.size();
    for (size_t i = 0; i < e.items.size(); ++i) {
      if (i < n_pos) {
        a.pos.push_back(eval(*e.items[i], sc));
      } else {
        a.kw.emplace_back(e.kw_names[i - n_pos], eval(*e.items[i], sc));
      }
    }
    return a;
  }

  Value loop_object(const std::vector<Value>& items, size_t i) {
    const int64_t n = int64_t(items.size()), k = int64_t(i);
    Value loop{Object{}};
    loop.set("index0", Value(k));
    loop.set("index", Value(k + 1));
    loop.set("revindex0", Value(n - k - 1));
    loop.set("revindex", Value(n - k));
    loop.set("first", Value(k == 0));
    loop.set("last", Value(k == n - 1));
    loop.set("length", Value(n));
    loop.set("depth", Value(1));
    loop.set("depth0", Value(0));
    loop.set("previtem", k > 0 ? items[i - 1] : Value());
    loop.set("nextitem", k + 1 < n ? items[i + 1] : Value());
    loop.set("cycle", Value::function(
                          [k](Args& a) -> Value {
                            if (a.pos.empty()) throw TemplateError("no items for cycling given");
                            return a.pos[size_t(k) % a.pos.size()];
                          },
                          "loop.cycle"));
    loop.set("changed",
             Value::function([](Args&) -> Value { throw Unsupported("loop.changed()"); }, "loop.changed"));
    return loop;
  }

  void assign(Scope& sc, const std::vector<std::string>& names, const Value& v, int line) {
    if (names.size() == 1) return sc.set(names[0], v);
    const std::vector<Value> items = iterate(v);
    if (items.size() != names.size()) {
      throw TemplateError("line " + std::to_string(line) + ": cannot unpack " + std::to_string(items.size()) +
                          " values into " + std::to_string(names.size()) + " names");
    }
    for (size_t i = 0; i < names.size(); ++i) sc.set(names[i], items[i]);
  }

  Flow exec(const Node& n, Scope& sc, std::string& out) {
    switch (n.kind) {
      case Node::Kind::Text:
        out += n.text;
        return Flow::Normal;
      case Node::Kind::Output:
        out += to_str(eval(*n.expr, sc));
        return Flow::Normal;
      case Node::Kind::If:
        for (size_t b = 0; b < n.branches.size(); ++b) {
          if (b >= n.conds.size() || eval(*n.conds[b], sc).truthy()) return exec(n.branches[b], sc, out);
        }
        return Flow::Normal;
      case Node::Kind::For: {
        std::vector<Value> items = iterate(eval(*n.expr, sc));
        if (n.filter) {
          // `for x in xs if cond`: the condition sees the loop variables, and the loop counts what passes.
          std::vector<Value> kept;
          for (const Value& v : items) {
            Scope probe{{}, &sc};
            assign(probe, n.targets, v, n.line);
            if (eval(*n.filter, probe).truthy()) kept.push_back(v);
          }
          items = std::move(kept);
        }
        if (items.empty()) {
          Scope inner{{}, &sc};
          exec(n.else_body, inner, out);
          return Flow::Normal;
        }
        for (size_t i = 0; i < items.size(); ++i) {
          Scope iter{{}, &sc};
          iter.set("loop", loop_object(items, i));
          assign(iter, n.targets, items[i], n.line);
          if (exec(n.body, iter, out) == Flow::Break) break;
        }
        return Flow::Normal;
      }
      case Node::Kind::Set: {
        Value v = eval(*n.expr, sc);
        if (n.attr) {
          const Value* ns = sc.find(n.targets[0]);
          if (!ns || !ns->is_namespace()) {
            throw TemplateError("line " + std::to_string(n.line) +
                                ": cannot assign attribute on non-namespace object");
          }
          Value target = *ns;  // shares the namespace's dict
          target.set(n.targets[1], std::move(v));
          return Flow::Normal;
        }
        assign(sc, n.targets, v, n.line);
        return Flow::Normal;
      }
      case Node::Kind::SetBlock: {
        std::string text;
        exec(n.body, sc, text);
        sc.set(n.targets[0], Value(text));
        return Flow::Normal;
      }
      case Node::Kind::Macro: {
        const Node* def = &n;
        const Scope* where = &sc;
        sc.set(
            n.name,
            Value::function(
                [this, def, where](Args& a) -> Value {
                  // A macro calling itself without end would exhaust the stack: refused.
                  if (++calls_ > kMaxCalls)
                    throw TemplateError("macros nested deeper than " + std::to_string(kMaxCalls) + " calls");
                  struct Leave {
                    int& d;
                    ~Leave() { --d; }
                  } leave{calls_};
                  Scope call{{}, where};
                  if (a.pos.size() > def->params.size())
                    throw TemplateError("macro '" + def->name + "' takes not more than " +
                                        std::to_string(def->params.size()) + " arguments");
                  for (size_t i = 0; i < def->params.size(); ++i) {
                    Value v = a.get(i, def->params[i]);
                    if (v.is_undefined() && def->defaults[i]) v = eval(*def->defaults[i], call);
                    call.set(def->params[i], v);
                  }
                  for (const auto& [k, v] : a.kw) {
                    bool known = false;
                    for (const std::string& p : def->params) known |= p == k;
                    if (!known)
                      throw TemplateError("macro '" + def->name + "' takes no keyword argument '" + k + "'");
                  }
                  std::string text;
                  exec(def->body, call, text);
                  return Value(text);
                },
                n.name));
        return Flow::Normal;
      }
      case Node::Kind::Break:
        return Flow::Break;
      case Node::Kind::Continue:
        return Flow::Continue;
      case Node::Kind::Scope:
        return exec(n.body, sc, out);
    }
    return Flow::Normal;
  }
};

}  // namespace

Template::Template(const std::string& source)
    : body_(std::make_unique<Body>(parse_template(split_template(source)))) {
  check_names(*body_);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Value& context) const {
  Scope top;
  if (context.is_object()) top.vars = context.as_object();
  std::string out;
  Interp in;
  in.exec(*body_, top, out);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& x : j) a.push_back(from_json(x));
      return Value(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (const auto& [k, x] : j.items()) o.emplace_back(k, from_json(x));
      return Value(std::move(o));
    }
    default:
      return Value();
  }
}

}  // namespace tilellm::jinja
