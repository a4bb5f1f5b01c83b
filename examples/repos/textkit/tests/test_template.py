import pytest

from textkit import TemplateError, render


def test_plain_text_passthrough():
    assert render("no placeholders here", {}) == "no placeholders here"
    assert render("", {}) == ""


def test_substitution_with_attributes_and_keys(context):
    out = render("{{user.name}} <{{ user.email }}> @ {{ site.name }} ({{site.visits}})", context)
    assert out == "ada lovelace <ada@example.org> @ Analytical (42)"


@pytest.mark.parametrize(
    "template, expected",
    [
        ("{{ user.name | upper }}", "ADA LOVELACE"),
        ("{{ user.name|title }}", "Ada Lovelace"),
        ("{{ site.name | lower | len }}", "10"),
        ("{{ items | len }}", "9"),
        ("[{{ missing | strip ? \"  pad \" }}]", "[pad]"),
    ],
)
def test_filters(context, template, expected):
    assert render(template, context) == expected


def test_defaults(context):
    assert render('{{ nope ? "n/a" }}', context) == "n/a"
    assert render('{{ empty ? "none" }}', context) == "none"
    assert render('{{ site.name ? "x" }}', context) == "Analytical"
    assert render('{{ user.age ? "" }}', context) == ""
    assert render('{{ nope ? "who?" }}', context) == "who?"


def test_escaped_braces(context):
    assert render("{{{{ literal }} and {{ site.visits }}", context) == "{{ literal }} and 42"


@pytest.mark.parametrize(
    "template, message",
    [
        ("{{ nope }}", "undefined name 'nope'"),
        ("{{ site.name | shout }}", "unknown filter 'shout'"),
        ("hello {{ user", "unclosed placeholder at offset 6"),
        ("{{  }}", "empty placeholder"),
        ("a{{}}b", "empty placeholder"),
        ("{{ x ? nope }}", "double-quoted"),
        ("{{ x ? \" }}", "double-quoted"),
    ],
)
def test_template_errors(context, template, message):
    with pytest.raises(TemplateError) as info:
        render(template, context)
    assert message in str(info.value)


def test_dict_keys_do_not_fall_back_to_attributes():
    with pytest.raises(TemplateError):
        render("{{ d.keys }}", {"d": {}})
