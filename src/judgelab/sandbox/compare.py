"""The io-mode comparison: a value a candidate returned against the value a task expects.

Standard library only: its text runs inside the sandbox, in the trusted tester (as the module
`compare`, beside `wire`), where a reply is rebuilt and compared under the run's limits; judgelab
imports it only to compare values it holds itself (its tests, the reference's own values). So
no reply the candidate writes is rebuilt or compared in judgelab's own process.

`plain(raw)` takes a value as wire's JSON (json.loads of a wire text) to the form the
comparison sees, without ever building a set or a dict keyed by a candidate's data (a set of
integers that share one hash costs quadratic time to build): tuples and sets become lists
(a set's items in the order of their repr, repeats dropped), dicts become JSON objects (keys
as JSON writes them: text), bytes latin-1 text, complex numbers [real, imag]. `normal(value)`
gives the same form for a Python value of judgelab's own (an expected value, a reference's).

`same(got, expected, rel_tol, abs_tol)` never raises:
- a boolean equals only a boolean (True is not 1);
- an expected integer is equalled exactly: by an integer, or by a float of exactly its value
  (7620753696.0 answers 7620753696; 7620753696.5 or 7620753697 do not);
- an expected float is equalled by a number within `rel_tol` relative or `abs_tol` absolute
  (an integer answers a float within the same tolerance; one too large for a float does not),
  NaN only by NaN and an infinity only by itself;
- lists item by item, objects key by key, the rest (text, None) by type and ==.
"""

import json
import math

REL_TOL, ABS_TOL = 1e-6, 1e-9  # a task's default float tolerance
MAX_DEPTH = 200  # as wire.MAX_DEPTH: deeper is not a value either side sends
SHOWN = 60  # characters of a value a reason shows


class NotComparable(ValueError):
    """A reply that is not a value of wire's format."""


class Unjsonable(ValueError):
    """A value of wire's format that JSON cannot carry (a dict keyed by tuples): a wrong
    answer to a task whose expected values are JSON, not a forgery."""


def plain(raw, depth=0):
    """The comparison's form of wire JSON `raw` (see the module docstring)."""
    if depth > MAX_DEPTH:
        raise NotComparable(f"nested deeper than {MAX_DEPTH}")
    kind = type(raw)
    if kind is str or kind is int or kind is float or kind is bool or raw is None:
        return raw
    if kind is list:
        return [plain(item, depth + 1) for item in raw]
    if kind is not dict or len(raw) != 1:
        raise NotComparable(f"unexpected JSON {kind.__name__}")
    ((tag, body),) = raw.items()
    if tag == "b" and type(body) is str:
        try:
            return bytes.fromhex(body).decode("latin-1")
        except ValueError:
            raise NotComparable("bytes that are not hex") from None
    if type(body) is not list:
        raise NotComparable(f"tag {tag!r} without a list")
    if tag == "c" and len(body) == 2 and all(type(x) in (int, float) for x in body):
        try:
            return [float(body[0]), float(body[1])]
        except OverflowError:
            raise NotComparable("a complex number too large") from None
    if tag == "t":
        return [plain(item, depth + 1) for item in body]
    if tag in ("s", "f"):
        keyed = sorted(((_repr(item, depth + 1), item) for item in body), key=_first)
        kept = [item for n, (key, item) in enumerate(keyed) if n == 0 or keyed[n - 1][0] != key]
        return [plain(item, depth + 1) for item in kept]
    if tag == "d":
        if any(type(pair) is not list or len(pair) != 2 for pair in body):
            raise NotComparable("a dict entry that is not a pair")
        return {_key(k): plain(v, depth + 1) for k, v in body}  # text keys: randomised hashes
    raise NotComparable(f"unknown tag {tag!r}")


def _first(pair):
    return pair[0]


def _repr(raw, depth):
    """repr() of the value wire JSON `raw` stands for (scalars and tuples; JSON text for the
    rest): the order in which a set's items are listed."""
    if depth > MAX_DEPTH:
        raise NotComparable(f"nested deeper than {MAX_DEPTH}")
    kind = type(raw)
    if kind is str or kind is int or kind is float or kind is bool or raw is None:
        return repr(raw)
    if kind is dict and len(raw) == 1 and type(raw.get("t")) is list:
        items = [_repr(item, depth + 1) for item in raw["t"]]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return json.dumps(raw, sort_keys=True)


def _key(raw):
    """A dict key as JSON writes it."""
    kind = type(raw)
    if kind is str:
        return raw
    if kind is bool or raw is None or kind is float:
        return json.dumps(raw)
    if kind is int:
        return str(raw)
    raise Unjsonable("a dict with a key JSON cannot carry")


def normal(value):
    """The comparison's form of a Python value of judgelab's own (never a candidate's)."""
    return json.loads(json.dumps(value, allow_nan=True, sort_keys=True, default=_unjson))


def _unjson(value):
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, complex):
        return [value.real, value.imag]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    raise TypeError(type(value).__name__)


def same(got, expected, rel_tol=REL_TOL, abs_tol=ABS_TOL):
    """Whether `got` answers `expected` (both in the comparison's form; module docstring)."""
    if type(got) is bool or type(expected) is bool:
        return type(got) is type(expected) and got == expected
    number = (int, float)
    if type(expected) is int:
        return type(got) in number and got == expected  # exact, float against int included
    if type(expected) is float and type(got) in number:
        return _close(got, expected, rel_tol, abs_tol)
    if type(got) is list and type(expected) is list:
        return len(got) == len(expected) and all(
            same(g, e, rel_tol, abs_tol) for g, e in zip(got, expected, strict=True)
        )
    if type(got) is dict and type(expected) is dict:
        return got.keys() == expected.keys() and all(
            same(got[k], expected[k], rel_tol, abs_tol) for k in expected
        )
    return type(got) is type(expected) and got == expected


def _close(got, expected, rel_tol, abs_tol):
    try:
        got = float(got)
    except OverflowError:  # an integer beyond any float
        return False
    if math.isnan(got) or math.isnan(expected):
        return math.isnan(got) and math.isnan(expected)
    return math.isclose(got, expected, rel_tol=rel_tol, abs_tol=abs_tol)


def shown(value):
    """At most SHOWN characters of `value` (the comparison's form) as JSON writes it, for a
    reason; never raises, and reads no more of the value than it shows (an integer of
    thousands of digits is named by its size: its digits cost quadratic time to write)."""
    out = []
    _shown(value, out)
    return "".join(out)[:SHOWN]


def _shown(value, out):
    if sum(map(len, out)) > SHOWN:
        return
    kind = type(value)
    if kind is list or kind is dict:
        out.append("[" if kind is list else "{")
        items = value if kind is list else sorted(value)
        for n, item in enumerate(items):
            if sum(map(len, out)) > SHOWN:
                return
            out.append(", " if n else "")
            if kind is dict:
                out.append(json.dumps(item) + ": ")
                item = value[item]
            _shown(item, out)
        out.append("]" if kind is list else "}")
    elif kind is int and value.bit_length() > 512:
        out.append(f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>")
    elif kind is str:
        out.append(json.dumps(value[: SHOWN + 1]))
    else:
        out.append(json.dumps(value))
