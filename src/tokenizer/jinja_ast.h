// The chat-template interpreter's inside (jinja.h is its contract): the template split into text and tags as
// jinja2's lexer splits it, the tokens of an expression, and the tree the parser builds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace tilellm::jinja {

// A piece of the template: literal text (whitespace control already applied), or the inside of a {{ }} or
// {% %} tag. Comments are dropped.
struct Piece {
  enum class Kind { Text, Expr, Stmt } kind;
  std::string text;
  int line = 1;
};

// Splits a template as jinja2 does with trim_blocks and lstrip_blocks on (Hugging Face's chat-template
// environment): newlines normalised to \n and one final newline dropped; {%- / -%} (and {{- -}}, {#- -#})
// strip all whitespace on their side; a block or comment tag alone on its line loses the indentation before
// it and the newline after it; + turns that off for a tag.
std::vector<Piece> split_template(const std::string& source);

struct Token {
  enum class Kind { Name, String, Int, Float, Op, End } kind;
  std::string text;  // the name, the operator, or the string's decoded value
  int64_t i = 0;
  double f = 0.0;
};

// The tokens of one tag's inside; a TemplateError for what jinja2 cannot lex either.
std::vector<Token> tokenize(const std::string& src, int line);

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,  // value
    Name,     // name
    List,     // items
    Tuple,    // items
    Dict,     // items: key, value, key, value...
    Attr,     // a.name
    Index,    // a[b]
    Slice,    // a[b:c:d], each of b, c, d may be null
    Call,     // a(items..., kw_names[i] = items[n_pos + i])
    Filter,   // a | name(items..., kw)   (a null inside a filter block's chain: not used)
    Test,     // a is [not] name(items...)
    Unary,    // name: "-", "+", "not"; a
    Binary,   // name: operator; a, b
    And,
    Or,
    Compare,  // a, then (ops[i], items[i])...
    Cond,     // b if a else c (c null: undefined)
  } kind;
  int line = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::string> kw_names;  // Call/Filter/Test keyword arguments: the last kw_names.size() items
  std::vector<std::string> ops;       // Compare
  bool negate = false;                // Test: is not
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue, Scope } kind;
  int line = 0;
  std::string text;                  // Text
  ExprPtr expr;                      // Output, Set value, For iterable
  std::vector<std::string> targets;  // For loop variables; Set names (or {namespace, attribute} with attr)
  bool attr = false;                 // Set: targets are namespace.attribute
  std::vector<ExprPtr> conds;        // If: the if/elif conditions, one per branch of `branches` ...
  std::vector<Body> branches;        // ... plus a last unconditional (else) branch when there is one
  Body body, else_body;              // For, SetBlock, Macro, Scope
  ExprPtr filter;                    // For: `for x in xs if cond`
  std::string name;                  // Macro
  std::vector<std::string> params;   // Macro parameters, with defaults[i] (null: none)
  std::vector<ExprPtr> defaults;
};

// Parses the pieces into a tree; constructs jinja2 has but this interpreter does not are Unsupported, syntax
// jinja2 rejects too is a TemplateError.
Body parse_template(const std::vector<Piece>& pieces);

}  // namespace tilellm::jinja
