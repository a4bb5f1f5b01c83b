import pytest

from textkit import split_words, to_camel, to_kebab, to_pascal, to_snake


@pytest.mark.parametrize(
    "name, words",
    [
        ("snake_case_name", ["snake", "case", "name"]),
        ("camelCaseName", ["camel", "case", "name"]),
        ("HTTPServerError", ["http", "server", "error"]),
        ("version2Update10", ["version", "2", "update", "10"]),
        ("__private__var", ["private", "var"]),
        ("", []),
    ],
)
def test_split_words(name, words):
    assert split_words(name) == words


def test_split_words_more_styles():
    assert split_words("kebab-case-name") == ["kebab", "case", "name"]
    assert split_words("PascalCaseName") == ["pascal", "case", "name"]
    assert split_words("parseHTTP") == ["parse", "http"]
    assert split_words("ALL_CAPS") == ["all", "caps"]
    assert split_words("A") == ["a"]
    assert split_words("ABc") == ["a", "bc"]


class TestConversions:
    def test_to_snake(self):
        assert to_snake("parseHTTPResponse") == "parse_http_response"
        assert to_snake("Already-kebab") == "already_kebab"

    def test_to_kebab(self):
        assert to_kebab("getUserID") == "get-user-id"

    def test_to_pascal(self):
        assert to_pascal("make_it_so") == "MakeItSo"
        assert to_pascal("x") == "X"

    def test_to_camel(self):
        assert to_camel("make_it_so") == "makeItSo"
        assert to_camel("XMLHttpRequest") == "xmlHttpRequest"
        assert to_camel("") == ""
        assert to_camel("one") == "one"

    def test_round_trip(self):
        for name in ["user_account_id", "max_retry_count", "html_to_pdf_2"]:
            assert to_snake(to_camel(name)) == name
            assert to_snake(to_kebab(to_pascal(name))) == name
