"""The test harness: the program the sandbox runs for every execution verdict (execution.py).

Never imported by judgelab: execution.py hands this file's text to the sandbox as the code's
runner (sandbox.Runner), so it runs with the standard library only, as the sandbox uid, in the
same interpreter as the untrusted code it loads from main.py.

Why a harness: a bare `python main.py` whose exit status is read as the verdict passes code
that leaves early with status 0 (os._exit(0), SystemExit(0), an atexit hook) or returns an
object equal to everything. Here a pass exists only as the line "pass <secret>" on fd 3, and
the harness writes it only after the tests ran to their end and nothing below was seen:
- the secret arrives on stdin, which is then pointed at /dev/null; the candidate never gets
  it from a file, an argument or the environment;
- every function the harness needs at the end (os.write, os._exit, the channel's fd) is bound
  before the candidate's code runs, and the harness leaves through os._exit, so no atexit
  hook, finaliser or replaced sys.exit of the candidate runs after the verdict;
- the tests call the candidate through a guard: each return value must be a plain value
  (built-in types, checked recursively) or an object whose class overrides no comparison,
  truth or arithmetic method; one that does is reported forged;
- the tests' module (HumanEval's `check` and its helpers such as `poly`) is built in a fresh
  namespace from the task's own prompt and tests, so the candidate's redefinition of a helper
  the tests use cannot change what they assert;
- builtins and the standard library's modules are checked before and after the tests: a
  builtin replaced, or a function of the candidate's planted in a standard module (math.isclose,
  os._exit), is reported forged.
What it cannot stop: code in the same interpreter can in principle read the harness's frames
and memory (the secret, the expected values in the test code). docs/SECURITY.md says why that
gap is acceptable for an RL reward.

stdin: one line, the secret; then one line of JSON:
  {"entry_point": str, "trusted": [first, last], "tests_from": int, "cases": null | [args...]}
  trusted: main.py's lines of the task's own prompt (imports and helpers; [0, 0] for none);
  tests_from: main.py's first line of the tests (check mode); cases: io mode's inputs
  (each a list of positional or a dict of keyword arguments).
fd 3 (lines): "forged <why>"; "pass <secret>" last, only after every test ran (check mode),
  or "pass <secret> <json>" after every case ran (io mode: a list, per case {"json": what it
  returned, as JSON text} or {"unserialisable": its type's name}).
Anything the code raises is printed as CPython would print it (the harness's own frames
left out) and the harness exits 1; a SystemExit is taken over (see `on_system_exit`).
"""

import ast
import builtins
import json
import os
import sys
import types

# The harness's own functions resolve builtins in this private copy (CPython binds a
# function's builtins when it is created), so the code cannot change them under it.
__builtins__ = dict(vars(builtins))
HERE = __file__
_write, _exit, _fstat, _excepthook = os.write, os._exit, os.fstat, sys.__excepthook__
MODULES = sys.modules
CHANNEL = 3
PLAIN_ATOMS = (int, float, bool, str, bytes, complex, type(None))
PLAIN_CONTAINERS = (list, tuple, set, frozenset, dict)
# Methods through which a value can answer a test's comparison for it.
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
MAX_NODES = 1_000_000


def say(line):
    try:
        _write(CHANNEL, (line.replace("\n", " ") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass  # the code closed the channel: no pass can be written, which fails the run


def forged(why):
    say("forged " + why)
    leave(1)


def leave(status):
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the code may have closed or replaced them
            pass
    _exit(status)


def print_exception(err):
    """As CPython's default hook prints it (its own printer: the same text, "Did you mean"
    included), without the harness's own frames."""
    seen = set()
    chained = err
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        chained.__traceback__ = _without_harness(chained.__traceback__)
        chained = chained.__cause__ or chained.__context__
    try:
        _excepthook(type(err), err, err.__traceback__)
    except Exception:  # noqa: BLE001
        pass


def _without_harness(tb):
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != HERE:
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def on_system_exit(err, when):
    """A SystemExit from the code: status 0 before the tests ended is a forged pass; another
    status is the code's own failure, ended as CPython would end it."""
    code = err.code
    if code is None or code == 0:
        forged(f"raised SystemExit({code!r}) {when}")
    if not isinstance(code, int):
        try:
            sys.__stderr__.write(str(code) + "\n")
        except Exception:  # noqa: BLE001
            pass
        code = 1
    sys.__stderr__.write(f"SystemExit: status {code} {when}\n")
    leave(code & 0xFF or 1)


def run(code_obj, namespace, when):
    try:
        exec(code_obj, namespace)
    except SystemExit as err:
        on_system_exit(err, when)
    except BaseException as err:  # noqa: BLE001 - the code's failure, printed as CPython does
        print_exception(err)
        leave(1)


# ------------------------------------------------------------------ what the code may not do


def answers_for_itself(value):
    """What `value`'s class answers for itself: the methods of ANSWERING it resolves to
    something other than its nearest built-in base does, or None."""
    cls = type(value)
    base = next((c for c in cls.__mro__ if c.__module__ == "builtins"), object)
    hit = sorted(n for n in ANSWERING if _lookup(cls, n) is not _lookup(base, n))
    if hit:
        return f"{cls.__qualname__} (it defines {', '.join(hit)})"
    return None


def _lookup(cls, name):
    """What an operator finds for `name` on instances of `cls`: the first class dict along the
    MRO that has it (the metaclass does not count)."""
    for klass in cls.__mro__:
        found = vars(klass).get(name, _lookup)
        if found is not _lookup:
            return found
    return None


def forged_value(value):
    """Why `value` is not what it claims, or None: every part of it is plain, or an object
    that answers no comparison for itself."""
    stack, seen, nodes = [value], set(), 0
    while stack:
        item = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return None
        kind = type(item)
        if kind in PLAIN_ATOMS:
            continue
        if kind in PLAIN_CONTAINERS:
            if id(item) in seen:
                continue
            seen.add(id(item))
            stack.extend(item.items() if kind is dict else item)
            continue
        why = answers_for_itself(item)
        if why is not None:
            return "returned an object of class " + why
    return None


def snapshot():
    """What the code must leave alone: the builtins, and which standard modules exist."""
    return dict(vars(builtins)), {n: m for n, m in MODULES.items() if _standard(n)}


def _standard(name):
    return name.split(".")[0] in sys.stdlib_module_names


def tampering(before, program, watched):
    """The first change the code made to builtins, to the standard modules in sys.modules, or
    to a function of a `watched` module (those the tests and the harness use), or None."""
    names, modules = before
    if sys.modules is not MODULES:
        return "replaced sys.modules"
    now = vars(builtins)
    for name in set(names) | set(now):
        if names.get(name, tampering) is not now.get(name, tampering):
            return f"changed builtins.{name}"
    for name, module in list(MODULES.items()):
        if not _standard(name):
            continue
        if name in modules and module is not modules[name]:
            return f"replaced the module {name}"
        if name not in modules and _planted(module):
            return f"planted a fake module {name}"
        if not isinstance(module, types.ModuleType) or name.split(".")[0] not in watched:
            continue  # typing.io and the like: a class standing in sys.modules
        for attr, obj in list(vars(module).items()):
            if _made_by_the_code(obj, program):
                return f"replaced {name}.{attr} with its own"
    return None


def _made_by_the_code(obj, program):
    """A function, method, class or instance that main.py defined (or a partial of one)."""
    kind = type(obj)
    if kind is types.FunctionType:
        return obj.__code__.co_filename == program
    if kind is types.MethodType or kind.__name__ == "partial":
        inner = getattr(obj, "__func__", None) or getattr(obj, "func", None)
        return inner is not None and _made_by_the_code(inner, program)
    if kind.__module__ == "__main__":
        return True
    return isinstance(obj, type) and obj.__module__ == "__main__"


def imported(nodes):
    """The top-level names of the modules `nodes` import, with the harness's own."""
    names = {"sys", "os", "json", "math", "types"}
    for node in nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import):
                names.update(alias.name.split(".")[0] for alias in inner.names)
            elif isinstance(inner, ast.ImportFrom) and inner.module and not inner.level:
                names.add(inner.module.split(".")[0])
    return names


def _planted(module):
    """A module object the code made itself rather than imported."""
    if isinstance(module, types.ModuleType):
        return module.__spec__ is None and module.__name__ not in sys.builtin_module_names
    return type(module).__module__ == "__main__" or getattr(module, "__module__", "") == "__main__"


# ------------------------------------------------------------------ the run


def split(tree, spec):
    """main.py's statements: the task's trusted prompt, the code's module, the tests, and the
    final `check(<entry_point>)` call (check mode)."""
    first, last = spec["trusted"]
    entry = spec["entry_point"]
    tests_from = spec.get("tests_from") or 10**9
    trusted, module, tests = [], [], []
    for node in tree.body:
        if node.lineno >= tests_from:
            tests.append(node)
            continue
        module.append(node)
        stub = getattr(node, "name", None) == entry
        if first <= node.lineno and node.end_lineno <= last and not stub:
            trusted.append(node)
    call = tests.pop() if tests else None
    return trusted, module, tests, call


def compiled(nodes, program):
    return compile(ast.Module(body=nodes, type_ignores=[]), program, "exec", dont_inherit=True)


def guard(function):
    def candidate(*args, **kwargs):
        value = function(*args, **kwargs)
        why = forged_value(value)
        if why is not None:
            forged(why)
        return value

    candidate.__wrapped__ = function
    for attr in ("__name__", "__qualname__", "__doc__"):
        try:
            setattr(candidate, attr, getattr(function, attr))
        except (AttributeError, TypeError):
            pass
    return candidate


def fresh_main(program):
    main = types.ModuleType("__main__")
    main.__file__ = program
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    return vars(main)


def main():
    received = b""
    while chunk := os.read(0, 65536):
        received += chunk
    secret, spec = received.decode().split("\n", 1)
    spec = json.loads(spec)
    channel = os.fstat(CHANNEL)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    program = os.path.abspath("main.py")
    sys.argv = ["main.py"]
    with open(program, encoding="utf-8", errors="surrogateescape") as handle:
        source = handle.read()
    try:
        tree = ast.parse(source, program)
    except (SyntaxError, ValueError) as err:  # as CPython reports a script it cannot compile
        print_exception(err.with_traceback(None))
        leave(1)
    trusted, module, tests, call = split(tree, spec)
    watched = imported(trusted + tests)
    before = snapshot()
    namespace = fresh_main(program)
    run(compiled(module, program), namespace, "before the tests ran")
    why = tampering(before, program, watched)
    if why:
        forged(why)
    entry = spec["entry_point"]
    returned = None
    if spec.get("cases") is not None:
        returned = run_cases(namespace.get(entry), spec["cases"], entry)
    else:
        # HumanEval's check and its helpers, from the task's own text only
        tests_ns = {"__name__": "__main__", "__builtins__": builtins, "__file__": program}
        run(compiled(trusted, program), tests_ns, "before the tests ran")
        run(compiled(tests, program), tests_ns, "before the tests ran")
        if entry in namespace:
            tests_ns[entry] = guard(namespace[entry])
        if call is not None:
            run(compiled([call], program), tests_ns, "before the tests finished")
    why = tampering(before, program, watched)
    if why:
        forged(why)
    if not same_file(CHANNEL, channel):
        sys.__stderr__.write("the code closed or replaced the harness's channel (fd 3)\n")
        leave(1)
    say("pass " + secret + ("" if returned is None else " " + json.dumps(returned)))
    leave(0)


def same_file(fd, stat):
    try:
        now = _fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (stat.st_dev, stat.st_ino)


def run_cases(function, cases, entry):
    """io mode: call the candidate on each input; what each call returned, as JSON text (or
    the name of a type JSON cannot carry), for the caller to compare outside the sandbox."""
    if function is None:
        sys.__stderr__.write(f"NameError: name {entry!r} is not defined\n")
        leave(1)
    returned = []
    for args in cases:
        try:
            value = function(**args) if isinstance(args, dict) else function(*args)
        except SystemExit as err:
            on_system_exit(err, "before the tests finished")
        except BaseException as err:  # noqa: BLE001
            print_exception(err)
            leave(1)
        why = forged_value(value)
        if why is not None:
            forged(why)
        try:
            returned.append({"json": json.dumps(value, sort_keys=True, default=_unjson)})
        except (TypeError, ValueError, RecursionError):
            returned.append({"unserialisable": type(value).__name__})
    return returned


def _unjson(value):
    """JSON for what json cannot carry; the same rule as execution._unjson, which normalises
    the expected values (this file imports nothing of judgelab; a test holds the two equal)."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, complex):
        return [value.real, value.imag]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    raise TypeError(type(value).__name__)


if __name__ == "__main__":
    main()
