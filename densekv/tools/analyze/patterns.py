"""Key names -> patterns: the parts that vary become placeholders (pure, no I/O).

RMA's idea (digit segments become `*`), with the identifiers real keyspaces use:

    {n}     an integer (`user:1001`, `-5`); also a number ending a word (`img77` -> `img{n}`)
    {hex}   8+ hex digits with both digits and letters, one case (`a3f9c2...`)
    {uuid}  a UUID in its 36-character form, anywhere in the key
    {tok}   16+ URL-safe characters that look random (token_looking): base62 / base64url
            tokens with or without digits (Flask-Session's 43-character ids, densekv's 32,
            Django's 32-character keys), however their letters happen to fall
    {b64}   standard base64 text with `+` or `=` padding, 20+ characters
    {date}  an ISO date, with or without a time (`2024-06-01`, `2024-06-01T10:00:00Z`)
    {bin}   bytes that are not printable text
    {w}     a word position where many different words were seen (merge_similar)

A key is split at `: / | # , ; = { }` and whitespace (UUIDs, dates and base64 are found
first, so their own `-`, `:` and `/` do not split them); a piece that is not an
identifier as a whole is split again at `.` and then at `-` and `_`. Everything else stays
literal. The result is a Pattern: tokens (placeholder or literal), a display name and a
SCAN MATCH glob (each placeholder a `*`, glob specials escaped).

`Rules` (from `--rules FILE`) name or split patterns by regex before any of this: the
first rule whose regex matches a key gives its pattern name (and glob), with `\\1` or
`\\g<name>` expanding the regex's groups. Built-in rules name the producers whose keys the
splitting alone would render poorly (Django's cache session keys glue the session key to
the word "cache").

The analyzer never prints a secret: a session id in a key name is a bearer token, and
reports are shared. So `{tok}` errs towards masking: a piece is a token when its words
are not words (token_looking: letter pairs rare in English, one- and two-letter words cut
out by case or digit changes, digit runs followed by letters), and some long identifiers
of acronyms and digits (`AWSBatchPolicy15`, `XMLHttpRequestQueue`) are masked with them.
In 300,000 draws of each (benchmarks/token_masking.py, seed 2), no Flask-Session id,
densekv token or 22-character base62 id stayed literal; one Django key and one 27-character
base62 id did, and 16-character base62 ids 43 times (1 in 7,000). It masks 4.5% of the
Python standard library's 16+ character identifiers (real tokens and test data among them).
tests/unit/test_analyze_tokens.py draws the issue's 700,000 among ordinary names.

Cost: one regex search for the rare cases and a split per key, about 3-6 us per key in
CPython; the result for a key is never stored, so memory does not grow with the keyspace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

#: Placeholders, as they appear in pattern names.
N, HEX, UUID, TOK, B64, DATE, BIN, WORD = "{n}", "{hex}", "{uuid}", "{tok}", "{b64}", "{date}", "{bin}", "{w}"
PLACEHOLDERS = frozenset({N, HEX, UUID, TOK, B64, DATE, BIN, WORD})

MAX_KEY_CHARS = 512  # the rest of a longer key is one literal "…" (its pattern stays bounded)

# Found in the whole key before splitting (their own characters include delimiters).
_UUID_RE = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
                      r"(?![0-9A-Za-z])")
_DATE_RE = re.compile(r"(?<![0-9])\d{4}-[01]\d-[0-3]\d(?:[T ][0-2]\d:[0-5]\d(?::[0-5]\d(?:\.\d+)?)?"
                      r"(?:Z|[+-][0-2]\d:?[0-5]\d)?)?(?![0-9])")
_B64_RE = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{20,}={0,2}(?![A-Za-z0-9+/=])")
_SENTINELS = {"\x01": UUID, "\x02": DATE, "\x03": B64}


def _b64_or_text(m: re.Match[str]) -> str:
    text = m.group(0)
    body = text.rstrip("=")
    if ("+" in body or text.endswith("=")) and random_looking(body.replace("+", "").replace("/", "")):
        return "\x03"
    return text


_NO_SENTINELS = {ord(c): None for c in _SENTINELS}
_PRE: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_UUID_RE, "\x01"), (_DATE_RE, "\x02"), (_B64_RE, _b64_or_text))
_FAST_PRE = re.compile(r"[-+=]")  # no UUID, date or base64 without one of these

_SPLIT = re.compile(r"([:/|#,;={}\s])")
_SUB = re.compile(r"([-_])")
_INT = re.compile(r"-?\d+\Z")
_HEXCH = re.compile(r"[0-9a-fA-F]+\Z")
_TOKCH = re.compile(r"[A-Za-z0-9_-]+\Z")
_WORD_NUM = re.compile(r"([A-Za-z]+)(\d+)\Z")


_RUNS = re.compile(r"[a-z]+|[A-Z]+|[0-9]+")
_HAS = (re.compile(r"[a-z]"), re.compile(r"[A-Z]"), re.compile(r"[0-9]"))


def random_looking(text: str) -> bool:
    """Two or more of lower/upper/digit, and the class changes at >= 1 in 5 characters
    (random base62 changes at ~1 in 2; `someCamelCaseName` at ~1 in 5, and has no digit;
    letters alone must change at >= 1 in 3)."""
    lower, upper, digit = (bool(h.search(text)) for h in _HAS)
    if lower + upper + digit < 2:
        return False
    changes = len(_RUNS.findall(text)) - 1
    if not digit:
        return changes * 3 >= len(text)
    return changes * 5 >= len(text)


#: The letter pairs that make up 97% of the pairs inside words of English prose (counted
#: in the Vim manual's text: 257 of the 676). A random letter pair is one of them 38% of
#: the time, a pair inside an English word 97%: the strongest single sign of a token.
_PAIRS_TEXT = """
ab ac ad af ag ai ak al am an ap ar as at au av ax ay ba be bi bl bo br bu by ca ce ch ci ck cl
cm co cr ct cu da dd de di dl do ds du ea ec ed ee ef eg ei el em en ep er es et ev ew ex ey fa
fe ff fi fl fo fr ft fu ga ge gh gi gl gn gr gs gu ha he hi hl ho ht ia ib ic id ie if ig ik il
im in io ip ir is it iv ix iz ju ke ki ks la ld le li ll lo ls lt lu ly ma mb md me mi mm mo mp
ms mu na nc nd ne nf ng ni nl nn no ns nt nu nv ny oa ob oc od oe of og oi ol om on oo op or os
ot ou ov ow pa pe pi pl po pp pr ps pt pu py qu ra rc rd re rg ri rk rl rm rn ro rr rs rt ru rw
ry sa sc se sh si sl sn so sp sr ss st su sy ta tc td te th ti tl to tr ts tt tu tw tx ty ua ub
uc ue uf ug ui ul um un up ur us ut va ve vi wa we wh wi wo wr ws xa xe xi xp xt yn yo yp ys yt
ze"""
COMMON_PAIRS = frozenset(_PAIRS_TEXT.split())
TOKEN_MIN = 16  # shorter pieces stay literal (or {n}, {hex}): ids this short are not secrets
TOKEN_EVIDENCE = 0.2  # signs of randomness per character at which a piece is a token
_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+|[_-]+")


def randomness(text: str) -> int:
    """Signs that `text` is not made of words: letter pairs outside COMMON_PAIRS inside a
    word (camelCase, snake_case and kebab-case words: `getHTTPResponse` is get, HTTP,
    Response), words of one or two letters cut out by a case or digit change (`aZ9k`;
    `v_2_x` has none), and digit runs followed by letters (`ab12cd`, `8WIB`; `sha256`,
    `v2` have none)."""
    parts = _PARTS.findall(text)
    last = len(parts) - 1
    signs = 0
    for i, part in enumerate(parts):
        if part[0] in "_-":
            continue
        glued_before = i > 0 and parts[i - 1][0] not in "_-"
        glued_after = i < last and parts[i + 1][0] not in "_-"
        if part.isdigit():
            signs += glued_after
        elif len(part) <= 2:
            signs += glued_before or glued_after
        else:
            low = part.lower()
            signs += sum(a + b not in COMMON_PAIRS for a, b in pairwise(low))
    return signs


def token_looking(text: str) -> bool:
    """Whether a piece of URL-safe characters is a token (see the module docstring): at
    least TOKEN_MIN characters, and random_looking with digits in it, or TOKEN_EVIDENCE
    signs of randomness per character. Tokens with digits flip class too often for words;
    tokens without (`xeUDsrXLHC...`, one in a few thousand Flask-Session ids) still have
    letter pairs no word has."""
    if len(text) < TOKEN_MIN:
        return False
    if any(c.isdigit() for c in text) and random_looking(text):
        return True
    return randomness(text) >= TOKEN_EVIDENCE * len(text)


def classify(piece: str) -> str | None:
    """The placeholder a whole piece (no delimiters in it) stands for, or None (literal)."""
    if not piece:
        return None
    if piece in _SENTINELS:
        return _SENTINELS[piece]
    if _INT.match(piece):
        return N
    if not piece.isprintable() and not piece.translate(_NO_SENTINELS).isprintable():
        return BIN
    size = len(piece)
    if size >= 8 and _HEXCH.match(piece) and (piece.islower() or piece.isupper()) \
            and any(c.isdigit() for c in piece):
        return HEX
    if size >= TOKEN_MIN and _TOKCH.match(piece) and token_looking(piece):
        return TOK
    return None


Token = tuple[bool, str]  # (is a placeholder, text)


def _piece_tokens(piece: str, out: list[Token]) -> None:
    kind = classify(piece)
    if kind is not None:
        out.append((True, kind))
        return
    if "." in piece:
        parts = piece.split(".")
        for i, part in enumerate(parts):
            if i:
                out.append((False, "."))
            _piece_tokens(part, out)
        return
    if "-" in piece or "_" in piece:
        for sub in _SUB.split(piece):
            if sub in ("-", "_") or not sub:
                out.append((False, sub))
            else:
                kind = classify(sub)
                if kind is not None:
                    out.append((True, kind))
                else:
                    _word(sub, out)
        return
    _word(piece, out)


def _word(piece: str, out: list[Token]) -> None:
    m = _WORD_NUM.match(piece)
    if m:
        out.append((False, m.group(1)))
        out.append((True, N))
        return
    for ch, ph in _SENTINELS.items():  # a sentinel glued to a word (rare)
        if ch in piece:
            piece = piece.replace(ch, ph)
    out.append((False, piece))


def tokens_of(key: str) -> list[Token]:
    """The key as placeholder / literal tokens (see the module docstring)."""
    tail = ""
    if len(key) > MAX_KEY_CHARS:
        key, tail = key[:MAX_KEY_CHARS], "…"
    if _FAST_PRE.search(key):
        for regex, sentinel in _PRE:
            key = regex.sub(sentinel, key)
    out: list[Token] = []
    for piece in _SPLIT.split(key):
        if not piece:
            continue
        if len(piece) == 1 and _SPLIT.match(piece):
            out.append((False, piece))
        else:
            _piece_tokens(piece, out)
    if tail:
        out.append((False, tail))
    return [t for t in out if t[1]]


def name_of(tokens: Sequence[Token]) -> str:
    return "".join(text for _, text in tokens)


_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def glob_of(tokens: Sequence[Token]) -> str:
    """A SCAN MATCH glob that matches every key of the pattern (and maybe a few others)."""
    parts: list[str] = []
    for is_ph, text in tokens:
        if is_ph:
            if not parts or parts[-1] != "*":
                parts.append("*")
        else:
            parts.append(_GLOB_SPECIAL.sub(r"\\\1", text))
    return "".join(parts)


def decode_key(key: bytes) -> str:
    """Key bytes as text; bytes that are not UTF-8 stay as lone surrogates (-> {bin})."""
    return key.decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Pattern:
    name: str
    glob: str
    tokens: tuple[Token, ...]
    rule: str | None = None  # the rule that named it, if any


# --- rules -----------------------------------------------------------------------------


class RulesError(ValueError):
    """A --rules file that cannot be used (its message says which line and why)."""


@dataclass(frozen=True)
class Rule:
    regex: re.Pattern[str]
    name: str  # template: \1 / \g<name> expand the regex's groups
    glob: str | None = None  # template too; None: the longest literal prefix + "*"

    def apply(self, key: str) -> Pattern | None:
        m = self.regex.search(key)
        if m is None:
            return None
        name = m.expand(self.name)
        glob = m.expand(self.glob) if self.glob is not None else _prefix_glob(key[: m.start()]) if m.start() else \
            _prefix_glob(_literal_prefix(self.regex.pattern, key))
        return Pattern(name, glob, ((False, name),), rule=self.regex.pattern)


def _literal_prefix(regex: str, key: str) -> str:
    m = re.match(r"\^?((?:[A-Za-z0-9:_/-]|\\.)*)", regex)
    prefix = re.sub(r"\\(.)", r"\1", m.group(1)) if m else ""
    return prefix if key.startswith(prefix) else ""


def _prefix_glob(prefix: str) -> str:
    return _GLOB_SPECIAL.sub(r"\\\1", prefix) + "*"


#: Producers whose keys splitting alone renders poorly (user rules come first).
BUILTIN_RULES = (
    # Django's cache session backend: KEY_PREFIX:VERSION:django.contrib.sessions.cache<key>
    Rule(re.compile(r"\A(?P<p>[^:]*:\d+:django\.contrib\.sessions\.cache(?:d_db)?)[a-z0-9]{8,40}\Z"),
         r"\g<p>{tok}", r"\g<p>*"),
)


class Rules:
    """User rules (first match wins), then the built-in ones, then automatic patterns."""

    def __init__(self, rules: Iterable[Rule] = (), builtin: bool = True) -> None:
        self.rules = tuple(rules) + (BUILTIN_RULES if builtin else ())

    @classmethod
    def load(cls, path: str | Path) -> Rules:
        """A rules file: JSON `[{"name": ..., "regex": ..., "glob": ...}]` (glob optional),
        or text lines `NAME = REGEX` (blank lines and lines starting with # ignored)."""
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise RulesError(f"cannot read the rules file {path}: {exc.strerror}") from exc
        entries: list[tuple[str, str, str | None, str]] = []
        if text.lstrip().startswith("["):
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise RulesError(f"{path}: not valid JSON ({exc})") from exc
            for i, item in enumerate(data if isinstance(data, list) else [None]):
                if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                        or not isinstance(item.get("regex"), str):
                    raise RulesError(f"{path}: entry {i} needs \"name\" and \"regex\" strings")
                glob = item.get("glob")
                entries.append((item["name"], item["regex"], glob if isinstance(glob, str) else None, f"entry {i}"))
        else:
            for n, line in enumerate(text.splitlines(), 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                name, sep, regex = line.partition("=")
                if not sep or not name.strip() or not regex.strip():
                    raise RulesError(f"{path}:{n}: expected NAME = REGEX")
                entries.append((name.strip(), regex.strip(), None, f"line {n}"))
        rules = []
        for name, regex, glob, where in entries:
            try:
                rules.append(Rule(re.compile(regex), name, glob))
            except re.error as exc:
                raise RulesError(f"{path}: {where}: bad regex {regex!r}: {exc}") from exc
        return cls(rules)

    def pattern(self, key: bytes) -> Pattern:
        text = decode_key(key)
        for rule in self.rules:
            found = rule.apply(text)
            if found is not None:
                return found
        tokens = tuple(tokens_of(text))
        return Pattern(name_of(tokens), glob_of(tokens), tokens)

    def name(self, key: bytes) -> str:
        """Only the name (the scan's per-key fast path)."""
        text = decode_key(key)
        for rule in self.rules:
            found = rule.apply(text)
            if found is not None:
                return found.name
        return name_of(tokens_of(text))


# --- merging -----------------------------------------------------------------------------

MERGE_VARIANTS = 8  # distinct words at one position before they become {w}


def merge_key(tokens: Sequence[Token], position: int) -> tuple[Token, ...]:
    return tuple(tokens[:position]) + ((True, WORD),) + tuple(tokens[position + 1:])


def merge_plan(patterns: Sequence[tuple[Token, ...]], variants: int = MERGE_VARIANTS) -> dict[str, tuple[Token, ...]]:
    """Which patterns merge, and into what: patterns that differ only in one literal token
    (same placeholders elsewhere), with at least `variants` different words there
    (`cache:en:{n}`, `cache:fr:{n}`, ... -> `cache:{w}:{n}`). Name -> merged tokens; the
    first position that merges wins. Literal delimiters never become {w}."""
    groups: dict[tuple[Token, ...], set[str]] = {}
    for tokens in patterns:
        for i, (is_ph, text) in enumerate(tokens):
            if not is_ph and not _SPLIT.fullmatch(text) and text not in (".", "-", "_"):
                groups.setdefault(merge_key(tokens, i), set()).add(text)
    out: dict[str, tuple[Token, ...]] = {}
    for tokens in patterns:
        name = name_of(tokens)
        for i, (is_ph, _) in enumerate(tokens):
            if is_ph:
                continue
            key = merge_key(tokens, i)
            if len(groups.get(key, ())) >= variants:
                out[name] = key
                break
    return out
