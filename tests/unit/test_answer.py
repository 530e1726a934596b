from judgelab.answer import parse_answer

TAGGED = "<request>sum two numbers</request>\n<language>Python</language>\n<code>\n{code}\n</code>"


def test_all_tags() -> None:
    a = parse_answer(TAGGED.format(code="def add(a, b):\n    return a + b"))
    assert (a.request, a.language, a.code_source) == ("sum two numbers", "Python", "tag")
    assert a.code == "def add(a, b):\n    return a + b"


def test_body_only_code_keeps_its_indentation() -> None:
    a = parse_answer(TAGGED.format(code="    x = 1\n    return x"))
    assert a.code == "    x = 1\n    return x"


def test_fence_inside_code_tag_is_unwrapped() -> None:
    a = parse_answer(TAGGED.format(code="```python\ndef f():\n    return 1\n```"))
    assert a.code == "def f():\n    return 1"
    assert a.code_source == "tag"


def test_fence_without_tags_is_found_but_not_tagged() -> None:
    a = parse_answer("Here:\n```python\nprint(1)\n```\n")
    assert (a.code, a.code_source, a.request, a.language) == ("print(1)", "fence", None, None)


def test_no_code() -> None:
    for text in ("I cannot help", "<code>   </code>", "```js\nconsole.log(1)\n```"):
        a = parse_answer(text)
        assert (a.code, a.code_source) == (None, "none")


def test_unclosed_code_tag_runs_to_the_end() -> None:
    text = (
        "```xml\n<request>r</request>\n<language>Python</language>\n"
        "<code>\ndef f():\n    return 1\n```"
    )
    a = parse_answer(text)
    assert (a.code, a.code_source) == ("def f():\n    return 1", "unclosed")
    assert (a.request, a.language) == ("r", "Python")
    truncated = "<request>r</request><language>Python</language><code>\ndef f():\n    return (1,"
    assert parse_answer(truncated).code == "def f():\n    return (1,"
