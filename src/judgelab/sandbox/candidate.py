"""The candidate's side of a test run: import the code, then answer calls. Nothing else.

Never imported by judgelab: the launcher runs this file's text in the candidate's own process
(tests mode), with the standard library only and the module `wire` (wire.py) beside it. It is
the candidate's process: the code can read and change everything here, and that is fine,
because nothing here is worth having. The process holds no test, no expected value, no secret
and no way to the verdict: the trusted tester, in another process under another uid, sends
each call's arguments and rebuilds what comes back from plain data (wire.py), however it was
written.

Descriptors: 0 /dev/null; 1 and 2 the run's stdout and stderr; 3 the calls (lines of JSON:
{"name", "args", "kwargs"}, the arguments in wire's format, or {"name", "batch": [[args,
kwargs], ...]} for calls all known in advance); 4 the replies, one line each:
  {"ready": 1}                            the code was imported (first line)
  {"import_failed": "<Type>: <message>"}  it raised while imported (its traceback on stderr)
  {"value": "<wire text>"}                a call's return value
  {"raised": "<builtin exception name>", "type": "<its class>", "message": str}
                                          a call raised (its traceback on stderr)
  {"forged": why}                         a call returned something that is not plain data
  {"values": [...]}                       a batch's values; with "case" and one of the two
                                          above: the values up to that case, and what it did
An exit (SystemExit, os._exit) ends the run without a reply; the tester calls that "exited
before answering".
"""

import builtins
import json
import os
import sys
import types

try:
    import wire  # in the sandbox: the launcher's copy of wire.py
except ImportError:  # imported by judgelab itself (its architecture tests), never run
    from judgelab.sandbox import wire

CALLS, REPLIES = 3, 4
HERE = "<candidate>"  # this runner's frames, left out of the code's tracebacks
PROGRAM = os.path.abspath("main.py")


def reply(message):
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(REPLIES, data) :]


def print_exception(err):
    """As CPython's default hook prints it, without this runner's frames."""
    chained, seen = err, set()
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        chained.__traceback__ = _without_runner(chained.__traceback__)
        chained = chained.__cause__ or chained.__context__
    try:
        sys.__excepthook__(type(err), err, err.__traceback__)
        sys.__stderr__.flush()
    except Exception:  # noqa: BLE001 - the code may have closed or replaced stderr
        pass


def _without_runner(tb):
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != HERE:
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def builtin_name(err):
    """The nearest built-in exception class of `err`: what the tester raises in its place."""
    for klass in type(err).__mro__:
        if getattr(builtins, klass.__name__, None) is klass:
            return klass.__name__
    return "Exception"


def leave(err):
    """A SystemExit: end as CPython ends a script that raised it."""
    code = err.code
    if code is not None and not isinstance(code, int):
        try:
            sys.__stderr__.write(f"{code}\n")
        except Exception:  # noqa: BLE001
            pass
        code = 1
    flush()
    os._exit((code or 0) & 0xFF)


def flush():
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass


def load():
    """main.py, run as __main__; the module's namespace."""
    sys.argv = [PROGRAM]
    sys.set_int_max_str_digits(wire.MAX_INT_DIGITS)
    with open(PROGRAM, encoding="utf-8", errors="surrogateescape") as handle:
        source = handle.read()
    main = types.ModuleType("__main__")
    main.__file__ = PROGRAM
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    try:
        code = compile(source, PROGRAM, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as err:  # as CPython reports a script it cannot compile
        print_exception(err.with_traceback(None))
        reply({"import_failed": f"{type(err).__name__}: {err}"})
        os._exit(1)
    try:
        exec(code, vars(main))
    except SystemExit as err:
        leave(err)
    except BaseException as err:  # noqa: BLE001 - the code's failure, printed as CPython does
        print_exception(err)
        reply({"import_failed": f"{builtin_name(err)}: {str(err)[:500]}"})
        flush()
        os._exit(1)
    return vars(main)


def answer(namespace, request):
    """The reply to one call ({"name", "args", "kwargs"}), or to a batch of calls ({"name",
    "batch": [[args, kwargs], ...]}: "values" for every call in order, up to the first that
    did not return plain data, whose reply follows with its "case")."""
    name = request["name"]
    if "batch" not in request:
        return call(namespace, name, request["args"], request["kwargs"])
    values = []
    for case, (args, kwargs) in enumerate(request["batch"]):
        one = call(namespace, name, args, kwargs)
        if "value" not in one:
            return {**one, "case": case, "values": values}
        values.append(one["value"])
    return {"values": values}


def call(namespace, name, args, kwargs):
    args, kwargs = wire.decode(args), wire.decode(kwargs)
    function = namespace.get(name)
    try:
        if function is None:
            raise NameError(f"name {name!r} is not defined")
        value = function(*args, **kwargs)
    except SystemExit as err:
        leave(err)
    except BaseException as err:  # noqa: BLE001 - the code's own failure, told to the tests
        print_exception(err)
        kind = type(err).__qualname__
        return {"raised": builtin_name(err), "type": kind, "message": str(err)[:2000]}
    try:
        return {"value": wire.encode(value)}
    except wire.NotPlain as err:
        return {"forged": str(err)}
    except (ValueError, RecursionError, MemoryError) as err:
        return {"raised": builtin_name(err), "message": f"the value cannot be sent: {err}"}


def main():
    namespace = load()
    reply({"ready": 1})
    calls = os.fdopen(CALLS, "rb")
    for line in calls:
        message = answer(namespace, json.loads(line))
        flush()  # the call's output before its reply: the tester may end the run on it
        reply(message)
    flush()
    os._exit(0)


if __name__ == "__main__":
    main()
