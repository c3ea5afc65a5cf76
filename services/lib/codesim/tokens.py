"""Pygments token streams of programs in the project's languages, without whitespace and comments."""

from __future__ import annotations

from functools import cache

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, _TokenType

from services.kernel.contracts import Language

# Pygments files C/C++ preprocessor directives under Comment.Preproc*, but they are code, not comments.
_CODE_COMMENT_TYPES = (Comment.Preproc, Comment.PreprocFile)


class UnsupportedLanguage(ValueError):
    """The language is not one of the project's ids (`services.kernel.contracts.Language`: python, c, cpp, java)."""


def check_language(language: str) -> Language:
    """The project's `Language` for this id (a `Language` member is its id string).

    Raises:
        UnsupportedLanguage: the id is not python, c, cpp or java.
    """
    try:
        return Language(language)
    except ValueError:
        expected = ", ".join(member.value for member in Language)
        raise UnsupportedLanguage(f"unsupported language {language!r}; expected one of {expected}") from None


@cache
def lexer(language: str) -> Lexer:
    """The Pygments lexer of a language (the project's ids are also Pygments lexer names), made once."""
    return get_lexer_by_name(language)


def is_comment_token(token_type: _TokenType) -> bool:
    """Whether a Pygments token is a comment (preprocessor directives and the like, which are code, are not)."""
    return token_type in Comment and not any(token_type in kept for kept in _CODE_COMMENT_TYPES)


def code_tokens(source: str, language: str) -> list[str]:
    """The program's Pygments tokens (lexer by language), without whitespace and comment tokens.

    Each token's text is stripped of surrounding whitespace. Preprocessor directives (which Pygments types as
    Comment.Preproc) are kept; Python docstrings are strings and are kept too.

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    check_language(language)
    tokens = []
    for token_type, value in lexer(language).get_tokens(source):
        text = value.strip()
        if text and not is_comment_token(token_type):
            tokens.append(text)
    return tokens


def code_token_types(source: str, language: str) -> list[str]:
    """The Pygments token types of the tokens `code_tokens` keeps, as strings (`"Token.Keyword"`,
    `"Token.Name.Function"`, ...), one per token and in the same order.

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    check_language(language)
    types = []
    for token_type, value in lexer(language).get_tokens(source):
        if value.strip() and not is_comment_token(token_type):
            types.append(str(token_type))
    return types


def blank_comments(source: str, language: str) -> str:
    """The source with every comment (as Pygments sees it) blanked: a comment becomes its newlines, or a single
    space if it has none, so the program still parses and its line structure holds.

    Raises:
        UnsupportedLanguage: the language is not python, c, cpp or java.
    """
    check_language(language)
    parts = []
    for token_type, value in lexer(language).get_tokens(source):
        if is_comment_token(token_type):
            parts.append("\n" * value.count("\n") or " ")
        else:
            parts.append(value)
    return "".join(parts)
