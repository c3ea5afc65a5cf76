"""Paper 001 V-D's operators for C, C++ and Java, found on tree-sitter parse trees.

Semantic: TYPE_NARROW, ROR_BOUNDARY, LOOP_SHORTEN, ARITH_FLIP. Controls: POST_TO_PRE_INCREMENT, COMMENT_INSERT.
Every site is a node of the parse tree and every edit replaces that node's (or its operator token's) exact span.

Two operators can turn a compiling program into one that does not, and each only proposes a site where a small
static analysis of the file shows that it will still compile:

* ARITH_FLIP needs both operands of the `+` to be numbers: `-` is not defined on Java or C++ strings, and
  `1 + p` on a pointer has no `1 - p`. A lightweight type environment (declarations, parameters, fields, typedefs,
  numeric macros, known library calls) types the operands; an operand of unknown type is not flipped.
* TYPE_NARROW must not break what the wider type made legal. C++: no template deduction mixing the narrowed
  variable with a 64-bit value (`max(ans, x)`), no reference or pointer binding, no `auto` copy, no brace
  initialiser. Java: every value assigned to the variable must already be an `int`, and it must not flow into a
  `Long` (boxing, collections, a `Long` return). In every language, a variable whose address is taken is left
  alone: `scanf("%lld", &x)` into an `int` is a memory error, not the overflow 001 means. Names are matched
  file-wide, which only ever makes the analysis more careful (another variable of the same name counts too).

The package has one module per concept: `tree` (the parse tree and its node helpers), `guards` (guard context),
`env` (the type environment), `c_types` and `java_types` (the two inferencers that fill it), `narrowing`
(TYPE_NARROW and its safety analysis) and `operators` (the other operators, the controls and `find_sites`).
"""

from services.lib.mutation.c_family.operators import find_sites
from services.lib.mutation.c_family.tree import COMMENT_TEXT, Program, leaves_without_comments, parse, parses

__all__ = ["COMMENT_TEXT", "Program", "find_sites", "leaves_without_comments", "parse", "parses"]
