// The chat-template interpreter's parser (jinja_ast.h): jinja2's expression grammar (its precedence levels,
// filters and tests binding tighter than any binary operator) and the statements chat templates use.
#include <set>

#include "tokenizer/jinja_ast.h"

namespace tilellm::jinja {
namespace {

ExprPtr make(Expr::Kind k, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->line = line;
  return e;
}

class ExprParser {
 public:
  ExprParser(std::vector<Token> toks, int line) : t_(std::move(toks)), line_(line) {}

  const Token& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::Kind::End; }
  bool is_op(const char* op, size_t k = 0) const {
    return peek(k).kind == Token::Kind::Op && peek(k).text == op;
  }
  bool is_name(const char* n, size_t k = 0) const {
    return peek(k).kind == Token::Kind::Name && peek(k).text == n;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++p_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++p_;
    return true;
  }
  [[noreturn]] void error(const std::string& what) const {
    throw TemplateError("line " + std::to_string(line_) + ": " + what);
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected '") + op + "', got '" + peek().text + "'");
  }
  std::string expect_name() {
    if (peek().kind != Token::Kind::Name) error("expected a name, got '" + peek().text + "'");
    return t_[p_++].text;
  }
  void expect_end() {
    if (!at_end()) error("unexpected '" + peek().text + "'");
  }

  // expr [, expr ...] as a tuple when there is a comma (jinja2's parse_tuple, without parentheses).
  ExprPtr tuple_or_expr() {
    ExprPtr first = expression();
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::Tuple, line_);
    t->items.push_back(std::move(first));
    while (skip_op(",")) {
      if (at_end() || is_op(")") || is_op("]")) break;
      t->items.push_back(expression());
    }
    return t;
  }

  // A template is data from a model file: nesting deeper than any real template is refused, not recursed.
  struct Deeper {
    ExprParser& p;
    explicit Deeper(ExprParser& q) : p(q) {
      if (++p.depth_ > kMaxDepth) p.error("expressions nested deeper than " + std::to_string(kMaxDepth));
    }
    ~Deeper() { --p.depth_; }
  };

  ExprPtr expression() {
    Deeper deeper(*this);
    ExprPtr e = or_expr();
    while (skip_name("if")) {
      auto c = make(Expr::Kind::Cond, line_);
      c->a = or_expr();
      c->b = std::move(e);
      if (skip_name("else")) c->c = expression();
      e = std::move(c);
    }
    return e;
  }

  // A condition inside `for ... if`: no conditional expression (jinja2 parses it without one).
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (skip_name("or")) {
      auto o = make(Expr::Kind::Or, line_);
      o->a = std::move(e);
      o->b = and_expr();
      e = std::move(o);
    }
    return e;
  }

 private:
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (skip_name("and")) {
      auto o = make(Expr::Kind::And, line_);
      o->a = std::move(e);
      o->b = not_expr();
      e = std::move(o);
    }
    return e;
  }

  ExprPtr not_expr() {
    Deeper deeper(*this);
    if (skip_name("not")) {
      auto u = make(Expr::Kind::Unary, line_);
      u->name = "not";
      u->a = not_expr();
      return u;
    }
    return compare();
  }

  ExprPtr compare() {
    ExprPtr e = math1();
    std::unique_ptr<Expr> cmp;
    for (;;) {
      std::string op;
      if (peek().kind == Token::Kind::Op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        op = t_[p_++].text;
      } else if (is_name("in")) {
        ++p_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        p_ += 2;
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::Compare, line_);
        cmp->a = std::move(e);
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(math1());
    }
    return cmp ? std::move(cmp) : std::move(e);
  }

  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::Binary, line_);
    e->name = std::move(op);
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }

  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      std::string op = t_[p_++].text;
      e = binary(op, std::move(e), concat());
    }
    return e;
  }

  ExprPtr concat() {
    ExprPtr e = math2();
    while (skip_op("~")) e = binary("~", std::move(e), math2());
    return e;
  }

  ExprPtr math2() {
    ExprPtr e = pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = t_[p_++].text;
      e = binary(op, std::move(e), pow());
    }
    return e;
  }

  ExprPtr pow() {
    ExprPtr e = unary(true);
    while (skip_op("**")) e = binary("**", std::move(e), unary(true));
    return e;
  }

  ExprPtr unary(bool with_filter) {
    Deeper deeper(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto u = make(Expr::Kind::Unary, line_);
      u->name = t_[p_++].text;
      u->a = unary(false);
      e = std::move(u);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filters(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& tok = peek();
    if (tok.kind == Token::Kind::Name) {
      ++p_;
      const std::string& n = tok.text;
      auto lit = make(Expr::Kind::Literal, line_);
      if (n == "true" || n == "True") {
        lit->value = Value(true);
      } else if (n == "false" || n == "False") {
        lit->value = Value(false);
      } else if (n == "none" || n == "None") {
        lit->value = Value::none();
      } else {
        auto e = make(Expr::Kind::Name, line_);
        e->name = n;
        return e;
      }
      return lit;
    }
    if (tok.kind == Token::Kind::String) {
      std::string s;
      while (peek().kind == Token::Kind::String) s += t_[p_++].text;  // adjacent literals join
      auto lit = make(Expr::Kind::Literal, line_);
      lit->value = Value(std::move(s));
      return lit;
    }
    if (tok.kind == Token::Kind::Int || tok.kind == Token::Kind::Float) {
      ++p_;
      auto lit = make(Expr::Kind::Literal, line_);
      lit->value = tok.kind == Token::Kind::Int ? Value(tok.i) : Value(tok.f);
      return lit;
    }
    if (skip_op("(")) {
      if (skip_op(")")) return make(Expr::Kind::Tuple, line_);
      ExprPtr e = expression();
      if (is_op(",")) {
        auto t = make(Expr::Kind::Tuple, line_);
        t->items.push_back(std::move(e));
        while (skip_op(",")) {
          if (is_op(")")) break;
          t->items.push_back(expression());
        }
        e = std::move(t);
      }
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto l = make(Expr::Kind::List, line_);
      while (!skip_op("]")) {
        if (!l->items.empty()) expect_op(",");
        if (skip_op("]")) break;
        l->items.push_back(expression());
      }
      return l;
    }
    if (skip_op("{")) {
      auto d = make(Expr::Kind::Dict, line_);
      while (!skip_op("}")) {
        if (!d->items.empty()) expect_op(",");
        if (skip_op("}")) break;
        d->items.push_back(expression());
        expect_op(":");
        d->items.push_back(expression());
      }
      return d;
    }
    error("unexpected '" + tok.text + "'" + (tok.kind == Token::Kind::End ? " (end of tag)" : ""));
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (skip_op(".")) {
        if (peek().kind == Token::Kind::Int) {
          auto ix = make(Expr::Kind::Index, line_);
          ix->a = std::move(e);
          ix->b = make(Expr::Kind::Literal, line_);
          ix->b->value = Value(t_[p_++].i);
          e = std::move(ix);
        } else {
          auto at = make(Expr::Kind::Attr, line_);
          at->a = std::move(e);
          at->name = expect_name();
          e = std::move(at);
        }
      } else if (skip_op("[")) {
        e = subscript(std::move(e));
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr target) {
    ExprPtr parts[3];
    int n_colons = 0;
    for (;;) {
      if (is_op("]")) break;
      if (skip_op(":")) {
        if (++n_colons > 2) error("too many ':' in a subscript");
        continue;
      }
      if (parts[n_colons]) error("expected ':' or ']' in a subscript");
      parts[n_colons] = expression();
      if (n_colons == 0 && is_op(",")) throw Unsupported("a tuple subscript (a[b, c])");
    }
    expect_op("]");
    if (n_colons == 0) {
      if (!parts[0]) error("an empty subscript");
      auto ix = make(Expr::Kind::Index, line_);
      ix->a = std::move(target);
      ix->b = std::move(parts[0]);
      return ix;
    }
    auto sl = make(Expr::Kind::Slice, line_);
    sl->a = std::move(target);
    sl->items.resize(3);
    for (int k = 0; k < 3; ++k) sl->items[size_t(k)] = std::move(parts[k]);
    return sl;
  }

  // (args): positional expressions, then name=expression keywords.
  void args(Expr& e) {
    expect_op("(");
    while (!skip_op(")")) {
      if (!e.items.empty()) expect_op(",");
      if (skip_op(")")) break;
      if (is_op("*") || is_op("**")) throw Unsupported("*args / **kwargs in a call");
      if (peek().kind == Token::Kind::Name && is_op("=", 1)) {
        e.kw_names.push_back(t_[p_].text);
        p_ += 2;
        e.items.push_back(expression());
      } else {
        if (!e.kw_names.empty()) error("a positional argument follows a keyword argument");
        e.items.push_back(expression());
      }
    }
  }

  ExprPtr call(ExprPtr callee) {
    auto c = make(Expr::Kind::Call, line_);
    c->a = std::move(callee);
    args(*c);
    return c;
  }

  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (skip_op("|")) {
        auto f = make(Expr::Kind::Filter, line_);
        f->a = std::move(e);
        f->name = expect_name();
        while (skip_op(".")) f->name += "." + expect_name();
        if (is_op("(")) args(*f);
        e = std::move(f);
      } else if (skip_name("is")) {
        auto t = make(Expr::Kind::Test, line_);
        t->negate = skip_name("not");
        t->a = std::move(e);
        t->name = expect_name();
        while (skip_op(".")) t->name += "." + expect_name();
        if (is_op("(")) {
          args(*t);
        } else if ((peek().kind == Token::Kind::Name || peek().kind == Token::Kind::String ||
                    peek().kind == Token::Kind::Int || peek().kind == Token::Kind::Float || is_op("[") ||
                    is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          t->items.push_back(postfix(primary()));  // `is sameas false`, `is divisibleby 3`
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  static constexpr int kMaxDepth = 200;
  std::vector<Token> t_;
  size_t p_ = 0;
  int line_;
  int depth_ = 0;
};

// Builds the tree from the pieces: a recursive descent over the statements.
class TemplateParser {
 public:
  explicit TemplateParser(const std::vector<Piece>& pieces) : ps_(pieces) {}

  Body parse_all() {
    std::string end;
    Body b = body({}, end);
    return b;
  }

 private:
  // Statements until one of `ends` (its name goes to `end`, its parser is left in `tail_`); the template's
  // end when `ends` is empty.
  Body body(const std::set<std::string>& ends, std::string& end) {
    if (++nesting_ > kMaxNesting) {
      throw TemplateError("statements nested deeper than " + std::to_string(kMaxNesting));
    }
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{nesting_};
    Body out;
    while (i_ < ps_.size()) {
      const Piece& p = ps_[i_++];
      if (p.kind == Piece::Kind::Text) {
        auto n = node(Node::Kind::Text, p.line);
        n->text = p.text;
        out.push_back(std::move(n));
        continue;
      }
      ExprParser ep(tokenize(p.text, p.line), p.line);
      if (p.kind == Piece::Kind::Expr) {
        auto n = node(Node::Kind::Output, p.line);
        n->expr = ep.tuple_or_expr();
        ep.expect_end();
        out.push_back(std::move(n));
        continue;
      }
      if (ep.at_end()) ep.error("an empty tag {% %}");
      if (ep.peek().kind != Token::Kind::Name) ep.error("a tag must start with a name");
      const std::string tag = ep.peek().text;
      if (ends.count(tag)) {
        end = tag;
        tail_ = std::make_unique<ExprParser>(std::move(ep));
        return out;
      }
      out.push_back(statement(tag, ep, p.line));
    }
    if (!ends.empty()) {
      throw TemplateError("unexpected end of template: expected one of the tags " + join(ends));
    }
    return out;
  }

  static std::string join(const std::set<std::string>& s) {
    std::string out;
    for (const std::string& x : s) out += (out.empty() ? "'" : ", '") + x + "'";
    return out;
  }

  static std::unique_ptr<Node> node(Node::Kind k, int line) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = line;
    return n;
  }

  std::unique_ptr<Node> statement(const std::string& tag, ExprParser& ep, int line) {
    ep.expect_name();
    if (tag == "if") {
      auto n = node(Node::Kind::If, line);
      n->conds.push_back(ep.expression());
      ep.expect_end();
      for (;;) {
        std::string end;
        n->branches.push_back(body({"elif", "else", "endif"}, end));
        ExprParser& t = *tail_;
        t.expect_name();
        if (end == "elif") {
          n->conds.push_back(t.expression());
          t.expect_end();
        } else if (end == "else") {
          t.expect_end();
          n->branches.push_back(body({"endif"}, end));
          tail_->expect_name();
          tail_->expect_end();
          break;
        } else {
          t.expect_end();
          break;
        }
      }
      return n;
    }
    if (tag == "for") {
      auto n = node(Node::Kind::For, line);
      do {
        n->targets.push_back(ep.expect_name());
      } while (ep.skip_op(","));
      if (!ep.skip_name("in")) ep.error("expected 'in' in a for loop");
      n->expr = ep.or_expr();
      if (ep.is_op(",")) {  // for x in a, b: a tuple
        auto t = make(Expr::Kind::Tuple, line);
        t->items.push_back(std::move(n->expr));
        while (ep.skip_op(",")) t->items.push_back(ep.or_expr());
        n->expr = std::move(t);
      }
      if (ep.skip_name("if")) n->filter = ep.expression();
      if (ep.is_name("recursive")) throw Unsupported("a recursive for loop");
      ep.expect_end();
      std::string end;
      n->body = body({"else", "endfor"}, end);
      tail_->expect_name();
      tail_->expect_end();
      if (end == "else") {
        n->else_body = body({"endfor"}, end);
        tail_->expect_name();
        tail_->expect_end();
      }
      return n;
    }
    if (tag == "set") {
      std::vector<std::string> names;
      bool attr = false;
      names.push_back(ep.expect_name());
      if (ep.skip_op(".")) {
        names.push_back(ep.expect_name());
        attr = true;
      } else {
        while (ep.skip_op(",")) names.push_back(ep.expect_name());
      }
      if (ep.skip_op("=")) {
        auto n = node(Node::Kind::Set, line);
        n->targets = std::move(names);
        n->attr = attr;
        n->expr = ep.tuple_or_expr();
        ep.expect_end();
        return n;
      }
      if (ep.is_op("|")) throw Unsupported("a filtered {% set %} block");
      ep.expect_end();
      if (attr || names.size() != 1) ep.error("a {% set %} block assigns one name");
      auto n = node(Node::Kind::SetBlock, line);
      n->targets = std::move(names);
      std::string end;
      n->body = body({"endset"}, end);
      tail_->expect_name();
      tail_->expect_end();
      return n;
    }
    if (tag == "macro") {
      auto n = node(Node::Kind::Macro, line);
      n->name = ep.expect_name();
      ep.expect_op("(");
      while (!ep.skip_op(")")) {
        if (!n->params.empty()) ep.expect_op(",");
        if (ep.skip_op(")")) break;
        n->params.push_back(ep.expect_name());
        n->defaults.push_back(ep.skip_op("=") ? ep.expression() : nullptr);
      }
      ep.expect_end();
      std::string end;
      n->body = body({"endmacro"}, end);
      tail_->expect_name();
      if (!tail_->at_end()) tail_->expect_name();  // {% endmacro name %}
      tail_->expect_end();
      return n;
    }
    if (tag == "break" || tag == "continue") {
      ep.expect_end();
      return node(tag == "break" ? Node::Kind::Break : Node::Kind::Continue, line);
    }
    if (tag == "generation") {  // Hugging Face's assistant-mask marker: renders its body as it is
      ep.expect_end();
      auto n = node(Node::Kind::Scope, line);
      std::string end;
      n->body = body({"endgeneration"}, end);
      tail_->expect_name();
      tail_->expect_end();
      return n;
    }
    static const std::set<std::string> kEnds = {"endif", "endfor", "endset",       "endmacro",
                                                "elif",  "else",   "endgeneration"};
    if (kEnds.count(tag)) ep.error("unexpected '{% " + tag + " %}'");
    throw Unsupported("{% " + tag + " %}");
  }

  static constexpr int kMaxNesting = 200;
  const std::vector<Piece>& ps_;
  size_t i_ = 0;
  int nesting_ = 0;
  std::unique_ptr<ExprParser> tail_;  // the tag that ended the last body
};

}  // namespace

Body parse_template(const std::vector<Piece>& pieces) {
  return TemplateParser(pieces).parse_all();
}

}  // namespace tilellm::jinja
