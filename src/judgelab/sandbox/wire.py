"""Plain data on the wire between the trusted tester and the candidate's process.

Standard library only: its text also runs inside the sandbox (as the module `wire` of the
candidate's and the tester's runners), so that both sides speak the same format.

A value crosses as JSON text and is rebuilt, on the receiving side, from exact built-in types
only; no object of the sender's ever crosses, whatever the sender's code did to this module in
its own process. The format:
- None, bool, str: as JSON; int as a JSON integer; float as a JSON number with a fraction or
  exponent (NaN and ±Infinity as Python's json writes them), so 1 and 1.0 stay apart;
- list as a JSON array;
- everything else as a one-key object: {"t": [...]} tuple, {"s": [...]} set, {"f": [...]}
  frozenset, {"d": [[key, value], ...]} dict (any hashable keys, in order), {"b": "hex"}
  bytes, {"c": [real, imag]} complex.

`encode` takes a value's data through its built-in base's own methods, so a subclass of a
built-in type (a namedtuple, an OrderedDict, an IntEnum) crosses as the built-in value it
holds, whatever its methods say. A subclass that answers a comparison, truth or arithmetic for
itself (an "equal to everything" trick) is refused with `NotPlain` all the same, and so is any
other object: that labels the attempt (the run is "forged"); it is not what keeps the verdict
safe, which is that only data crosses. `decode` raises
`Malformed` for anything that is not this format, too deep or too large, and `Costly` for a set
or dict whose items share their hashes (quadratic to build).
"""

import json

MAX_DEPTH = 200
MAX_INT_DIGITS = 100_000
# Methods through which a value can answer a test's comparison for itself.
ANSWERING = frozenset(
    (
        "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__len__",
        "__hash__", "__abs__", "__neg__", "__pos__", "__add__", "__radd__", "__sub__",
        "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__",
        "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__round__", "__float__",
        "__int__", "__index__", "__complex__", "__contains__", "__getattr__", "__getattribute__",
        "__instancecheck__", "__class__",
    )
)  # fmt: skip
_BASES = (bool, int, float, complex, str, bytes, list, tuple, dict, set, frozenset, type(None))


class NotPlain(TypeError):
    """A value that is not plain data (its class is named in the message)."""


class Malformed(ValueError):
    """Text that is not a value in this format."""


class Costly(ValueError):
    """A value in this format too costly to rebuild: a set or dict whose items share their
    hashes (each insert then probes every item before it: quadratic time)."""


SHARED_HASHES = 64  # a set or dict of more items than this must have half as many hashes


def _hashable(items, tag):
    """`items` (a set's, or a dict's keys) unless too many of them share a hash: rebuilding
    a set of 40,000 integers that are multiples of 2**61 - 1 (hash 0) costs a minute; their
    hashes, being distinct values or one value, never collide among themselves."""
    if len(items) > SHARED_HASHES:
        hashes = len({hash(item) for item in items})
        if hashes < len(items) // 2:
            raise Costly(f"a {tag} of {len(items)} items sharing {hashes} hashes")
    return items


def encode(value):
    """`value` as this format's JSON text; NotPlain when it is not plain data."""
    try:
        return json.dumps(_out(value, 0), allow_nan=True, separators=(",", ":"))
    except NotPlain:
        raise
    except TypeError as err:  # a class that claims a base it is not (a lying __mro__)
        raise NotPlain(f"returned an object that is not what its class claims ({err})") from None


def decode(text):
    """The plain value `text` holds, rebuilt from exact built-in types; Malformed otherwise."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise Malformed(f"not JSON: {type(err).__name__}") from None
    except MemoryError:
        raise Costly("a value larger than the memory limit") from None
    return _in(raw, 0)


def _base(value):
    """The built-in type `value` is, or stands for; NotPlain for anything else."""
    kind = type(value)
    if _is_base(kind):
        return kind
    base = next((c for c in kind.__mro__ if _is_base(c)), None)
    name = getattr(kind, "__qualname__", "?")
    if base is None:
        raise NotPlain(f"returned an object of class {name}, not plain data")
    for klass in kind.__mro__:
        if klass is base:
            break
        own = sorted(n for n in ANSWERING if n in vars(klass))
        if own and not _harmless(klass, own):
            raise NotPlain(f"returned an object of class {name} (it defines {', '.join(own)})")
    return base


def _is_base(kind):
    """By identity: a metaclass's __eq__ cannot make a class one of the built-in types."""
    return any(kind is base for base in _BASES)


def _harmless(klass, names):
    """The standard library's own subclasses (Enum's __hash__, Counter's arithmetic) answer
    as their data does."""
    return getattr(klass, "__module__", "") in ("collections", "enum")


def _out(value, depth):
    kind = type(value)
    # exact built-in types first, by identity (a metaclass cannot answer `is`)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if depth > MAX_DEPTH:
        raise NotPlain(f"a value nested deeper than {MAX_DEPTH}")
    if kind is list:
        return [_out(item, depth + 1) for item in value]
    if kind is tuple:
        return {"t": [_out(item, depth + 1) for item in value]}
    if kind is dict:
        return {"d": [[_out(k, depth + 1), _out(v, depth + 1)] for k, v in value.items()]}
    return _subclass_out(value, depth)


def _subclass_out(value, depth):
    """Any other value: its built-in base's data, read through the base's own methods."""
    base = _base(value)
    if base is type(None):
        return None
    if base is bool:
        return bool.__bool__(value) if type(value) is not bool else value
    if base is int:
        return int.__index__(value)
    if base is float:
        return float.__float__(value)
    if base is str:
        return str.__str__(value)
    if base is bytes:
        return {"b": bytes.hex(value)}
    if base is complex:
        return {"c": [complex.__getattribute__(value, "real"),
                      complex.__getattribute__(value, "imag")]}  # fmt: skip
    if base is list:
        return [_out(item, depth + 1) for item in list.__iter__(value)]
    if base is tuple:
        return {"t": [_out(item, depth + 1) for item in tuple.__iter__(value)]}
    if base is set or base is frozenset:
        items = [_out(item, depth + 1) for item in base.__iter__(value)]
        return {"s" if base is set else "f": items}
    pairs = dict.items(value)
    return {"d": [[_out(k, depth + 1), _out(v, depth + 1)] for k, v in pairs]}


def _in(raw, depth):
    if depth > MAX_DEPTH:
        raise Malformed(f"nested deeper than {MAX_DEPTH}")
    kind = type(raw)  # json.loads made it: an exact built-in type
    if kind is str or kind is float or kind is bool or raw is None:
        return raw
    if kind is int:
        if raw.bit_length() > MAX_INT_DIGITS * 4:
            raise Malformed("an integer too large")
        return raw
    if kind is list:
        return [_in(item, depth + 1) for item in raw]
    if kind is not dict or len(raw) != 1:
        raise Malformed(f"unexpected JSON {kind.__name__}")
    ((tag, body),) = raw.items()
    try:
        if tag == "b" and type(body) is str:
            return bytes.fromhex(body)
        if tag == "c" and type(body) is list and len(body) == 2:
            real, imag = body
            if type(real) in (int, float) and type(imag) in (int, float):
                return complex(real, imag)
        if type(body) is not list:
            raise Malformed(f"tag {tag!r} without a list")
        items = [_in(item, depth + 1) for item in body]
        if tag == "t":
            return tuple(items)
        if tag == "s":
            return set(_hashable(items, "set"))
        if tag == "f":
            return frozenset(_hashable(items, "frozenset"))
        if tag == "d":
            if any(type(pair) is not list or len(pair) != 2 for pair in body):
                raise Malformed("a dict entry that is not a pair")
            _hashable([k for k, _ in items], "dict")
            return {k: v for k, v in items}
    except (TypeError, ValueError) as err:  # an unhashable key or set member, bad hex
        if isinstance(err, Malformed | Costly):
            raise
        raise Malformed(f"tag {tag!r}: {err}") from None
    raise Malformed(f"unknown tag {tag!r}")
