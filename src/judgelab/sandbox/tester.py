"""The trusted side of a test run: the task's own tests, calling the candidate across a pipe.

Never imported by judgelab: the launcher runs this file's text in a process of its own (tests
mode), under a uid that is not the candidate's and not dumpable, with the standard library only
and the module `wire` (wire.py) beside it. The tests, their expected values and the verdict
live here and nowhere the candidate can reach: they arrive on stdin, a pipe from judgelab that
no other process of the run holds, and the verdict leaves on fd 3, the same.

stdin: one JSON object, then EOF:
  {"mode": "check", "entry_point": str, "prelude": str, "test": str}
      run `prelude` (the task's own imports and helpers, HumanEval's `poly` and the like) and
      `test` in a fresh namespace, then `check(candidate)`, `candidate` forwarding each call;
  {"mode": "calls", "entry_point": str, "batch": [[args, kwargs], ...]} (wire texts)
      with "expected": [value, ...] (compare.normal's form), "rel_tol", "abs_tol": call the
      candidate once per case, rebuild each value (compare.plain) and compare it here
      (compare.same): only the verdict leaves. Without "expected" (judgelab's own reference
      runs): report what each call returned, as written, for judgelab to rebuild.
fd 3: one JSON line, the verdict:
  {"verdict": "passed", "calls": n}          every test ran to its end
  {"verdict": "failed", "why", "detail", "calls"}   a test failed or the candidate raised
      (calls mode: "case", the call that raised; without "expected", "values", what the calls
      before it returned), or this process failed on the candidate's replies (`failure`)
  {"verdict": "wrong", "case", "got", "calls"}  (calls mode with "expected") the first value
      that differs from its expected one, "got" at most compare.SHOWN characters of it
  {"verdict": "import_failed", "why"}        the code raised (or did not compile) on import
  {"verdict": "exited", "calls": n}          the candidate's process ended before answering
  {"verdict": "forged", "why", "calls"}      a reply that is not plain data, or not a reply
  {"verdict": "returned", "values": [wire text, ...], "calls"}   (calls mode, no "expected")
  {"verdict": "error", "why"}                the tests themselves could not run (our side)
  {"contact": 1}   not a verdict: written before the first read of the candidate's replies;
      a run that ends without a verdict after it is the candidate's failure (a reply too
      costly to rebuild: this process was stopped by its limits), before it our own.
Every verdict line is short (its texts are cut), whatever the candidate sent, except
"returned" values, which carry only judgelab's own reference's replies.
fd 4: calls to the candidate; fd 5: its replies (candidate.py says their format).
"""

import builtins
import json
import linecache
import os
import sys
import traceback
import types

try:
    import compare  # in the sandbox: the launcher's copies of compare.py and wire.py
    import wire
except ImportError:  # imported by judgelab itself (its architecture tests), never run
    from judgelab.sandbox import compare, wire

CHANNEL, CALLS, REPLIES = 3, 4, 5
MAX_REPLY = 16 << 20  # bytes of one reply; more is not an answer
DETAIL_CHARS = 1500
CONTACT = {"contact": 1}  # the channel's line: the candidate's replies are being read
COSTLY = "a reply too costly to rebuild"


def say(message):
    """One line on the channel to judgelab."""
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(CHANNEL, data) :]


class Stop(BaseException):  # noqa: N818 - not an error of the tests: the run's end, told
    """Ends the tests with a verdict that is not theirs to catch (`except Exception` in a
    test does not swallow it)."""

    def __init__(self, verdict):
        super().__init__(verdict["verdict"])
        self.verdict = verdict


class CandidateError(Exception):
    """An exception of the candidate's that no built-in class stands for."""


class Link:
    """The pipes to the candidate: one call, one reply."""

    def __init__(self):
        self.buffer = bytearray()
        self.calls = 0
        self.contact = False  # whether anything of the candidate's has reached us

    def touch(self):
        """From the first read of the candidate's pipe on, a failure of this process may be the
        candidate's doing (a reply too costly to rebuild): say so on the channel first, where
        judgelab finds it if we die without a verdict (SIGXCPU, SIGKILL)."""
        if not self.contact:
            self.contact = True
            say(CONTACT)

    def read(self):
        self.touch()
        start = 0
        while (end := self.buffer.find(b"\n", start)) < 0:
            if len(self.buffer) > MAX_REPLY:
                raise Stop(self.verdict("forged", why=f"a reply longer than {MAX_REPLY} bytes"))
            chunk = os.read(REPLIES, 1 << 16)
            if not chunk:
                raise Stop(self.verdict("exited"))
            start = len(self.buffer)
            self.buffer += chunk
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            message = None
        if type(message) is not dict:
            raise Stop(self.verdict("forged", why="wrote to the reply pipe what is no reply"))
        return message

    def verdict(self, verdict, **fields):
        return {"verdict": verdict, "calls": self.calls, **fields}

    def request(self, name, args, kwargs):
        """A call's request, as bytes for the call pipe."""
        try:
            request = {"name": name, "args": wire.encode(list(args)),
                       "kwargs": wire.encode(dict(kwargs))}  # fmt: skip
        except wire.NotPlain as err:
            why = f"the tests pass the candidate what cannot cross to it ({err})"
            raise Stop({"verdict": "error", "why": why}) from None
        return (json.dumps(request) + "\n").encode()

    def send(self, data):
        try:
            while data:
                data = data[os.write(CALLS, data) :]
        except BrokenPipeError:
            raise Stop(self.verdict("exited")) from None

    def receive(self):
        """The next reply: the value it returned, or the exception it raised, raised here."""
        self.calls += 1
        return self.answer(self.read())

    def answer(self, message):
        """The value a reply holds, or the exception it tells of, raised here."""
        if "value" in message and type(message["value"]) is str:
            try:
                return wire.decode(message["value"])
            except wire.Malformed as err:
                why = f"a reply that is not plain data: {err}"
                raise Stop(self.verdict("forged", why=why)) from None
            except (wire.Costly, MemoryError, RecursionError) as err:
                why = f"{COSTLY}: {err}" if isinstance(err, wire.Costly) else COSTLY
                raise Stop(self.verdict("failed", why=why)) from None
        if "forged" in message:
            raise Stop(self.verdict("forged", why=str(message["forged"])[:300]))
        if "raised" in message:
            raise rebuilt(message.get("raised"), message.get("message"), message.get("type"))
        raise Stop(self.verdict("forged", why="wrote to the reply pipe what is no reply"))

    def call(self, name, args, kwargs):
        self.send(self.request(name, args, kwargs))
        return self.receive()


def rebuilt(name, message, kind=None):
    """The candidate's exception as the tests see it: the built-in class it names, else
    CandidateError; only names and text crossed (`kind`: its own class's name)."""
    text = str(message)[:2000]
    if kind and kind != name:
        text = f"{str(kind)[:100]}: {text}"
    klass = getattr(builtins, str(name), None)
    if not (isinstance(klass, type) and issubclass(klass, Exception)):  # never SystemExit
        return CandidateError(f"{name}: {text}")
    try:
        return klass(text)
    except Exception:  # noqa: BLE001 - a class whose constructor wants other arguments
        return CandidateError(f"{name}: {text}")


def forwarder(link, name):
    def candidate(*args, **kwargs):
        return link.call(name, args, kwargs)

    candidate.__name__ = candidate.__qualname__ = name
    return candidate


def described(err):
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def compiled(source, filename):
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec", dont_inherit=True, optimize=0)


def wait_ready(link):
    first = link.read()
    if "import_failed" in first:
        raise Stop({"verdict": "import_failed", "why": str(first["import_failed"])[:500]})
    if "ready" not in first:
        raise Stop(link.verdict("forged", why="wrote to the reply pipe what is no reply"))


def check(link, spec):
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compiled(spec.get("prelude") or "", "<prompt>"), namespace)
        exec(compiled(spec["test"], "<test>"), namespace)
        tests = namespace["check"]
    except Exception as err:  # noqa: BLE001 - the task's tests do not run: our side's failure
        return {"verdict": "error", "why": f"the task's tests do not run: {described(err)}"}
    wait_ready(link)
    candidate = forwarder(link, spec["entry_point"])
    namespace[spec["entry_point"]] = candidate  # tests that call it by name (HumanEval/33)
    try:
        tests(candidate)
    except Exception as err:  # noqa: BLE001 - a failed test, or the candidate's exception
        detail = "".join(traceback.format_exception(err.with_traceback(tests_only(err))))
        return link.verdict("failed", why=described(err)[:500], detail=detail[-DETAIL_CHARS:])
    return link.verdict("passed")


def tests_only(err):
    """`err`'s traceback through the tests' own frames, without the tester's."""
    kept, tb = [], err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in ("<test>", "<prompt>"):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def calls(link, spec):
    """Every call is known before the first, so they go as one batch: the candidate answers
    them in order, in one reply (a round trip per call would cost two context switches each).
    It sees no more than it would: the arguments, one call at a time. With "expected" (a
    candidate's run), each value is rebuilt and compared here (`compared`) and only the
    verdict leaves; without (a run of judgelab's own reference), the values go on as written."""
    wait_ready(link)
    batch = spec["batch"]
    link.send((json.dumps({"name": spec["entry_point"], "batch": batch}) + "\n").encode())
    link.calls = len(batch)
    reply = link.read()
    texts = reply.get("values")
    if type(texts) is not list or any(type(t) is not str for t in texts):
        raise Stop(link.verdict("forged", why="wrote to the reply pipe what is no reply"))
    case = reply.get("case")
    if "case" not in reply and len(texts) != len(batch):
        raise Stop(link.verdict("forged", why="a batch reply of the wrong length"))
    if "case" in reply and (type(case) is not int or case != len(texts)):
        raise Stop(link.verdict("forged", why="a batch reply of the wrong length"))
    if spec.get("expected") is not None:
        wrong = compared(link, spec, texts)
        if wrong is not None:
            return wrong
    if "case" not in reply:
        if spec.get("expected") is not None:
            return link.verdict("passed")
        return link.verdict("returned", values=texts)
    try:
        link.answer({k: v for k, v in reply.items() if k not in ("case", "values")})
    except Exception as err:  # noqa: BLE001 - the candidate's exception
        before = {} if spec.get("expected") is not None else {"values": texts}
        return link.verdict("failed", why=described(err)[:500], case=case, **before)
    raise Stop(link.verdict("forged", why="a batch reply that stopped at a value"))


def compared(link, spec, texts):
    """The verdict on the first value that differs from its expected one, or None: each
    rebuilt by compare.plain, which builds no set or dict keyed by the candidate's data."""
    expected = spec["expected"]
    rel_tol, abs_tol = spec.get("rel_tol", compare.REL_TOL), spec.get("abs_tol", compare.ABS_TOL)
    for case, (text, want) in enumerate(zip(texts, expected, strict=False)):
        try:
            got = compare.plain(json.loads(text))
        except compare.Unjsonable as err:
            return link.verdict("wrong", case=case, got=f"<{err}>")
        except (ValueError, RecursionError) as err:  # NotComparable is a ValueError
            why = f"a reply that is not plain data: {type(err).__name__}: {str(err)[:200]}"
            raise Stop(link.verdict("forged", why=why)) from None
        except MemoryError:
            raise Stop(link.verdict("failed", why=COSTLY)) from None
        if not compare.same(got, want, rel_tol, abs_tol):
            return link.verdict("wrong", case=case, got=compare.shown(got))
    return None


def main():
    sys.set_int_max_str_digits(wire.MAX_INT_DIGITS)
    received = b""
    while chunk := os.read(0, 1 << 16):
        received += chunk
    spec = json.loads(received)
    link = Link()
    try:
        verdict = check(link, spec) if spec["mode"] == "check" else calls(link, spec)
    except Stop as stop:
        verdict = stop.verdict
    except BaseException as err:  # noqa: BLE001 - never the candidate's pass
        verdict = failure(link, err)
    say(verdict)
    os._exit(0)


def failure(link, err):
    """The verdict when this process itself failed: before anything of the candidate's
    reached it, our own failure ("error"); after, its replies may be the cause (a MemoryError
    rebuilding one), so the candidate's: a failure, never unscored."""
    if not link.contact:
        return {"verdict": "error", "why": f"the tester failed: {described(err)[:300]}"}
    return link.verdict("failed", why=f"{COSTLY} (the tester failed: {described(err)[:200]})")


if __name__ == "__main__":
    main()
