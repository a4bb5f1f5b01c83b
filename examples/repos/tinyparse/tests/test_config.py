import pytest

from tinyparse import ConfigError, ParseError, parse_config


def test_sections_in_order_without_default(config):
    assert config.sections() == ["server", "paths"]
    assert config.has_section("SERVER")
    assert config.has_section("DEFAULT")
    assert not config.has_section("missing")


def test_plain_and_interpolated_values(config):
    assert config.get("server", "host") == "example.org"
    assert config.get("Server", "BASE_URL") == "http://example.org:8080"
    assert config.get("server", "base_url", raw=True) == "http://${host}:${port}"


def test_cross_section_interpolation(config):
    assert config.get("paths", "logs") == "/srv/app/logs"
    assert config.get("paths", "static") == "/srv/app/static"


def test_escaped_dollar(config):
    assert config.get("paths", "price") == "$5"


def test_inline_comments_and_quotes(config):
    assert config.get("server", "ratio") == "0.75"
    assert config.get("paths", "greeting") == "hello # not a comment"
    cfg = parse_config('[c]\na = red #primary\nb = a#b\nc = a# b\nd = #fff\ne = ""\nf=compact\n')
    assert [cfg.get("c", k) for k in "abcdef"] == ["red", "a#b", "a# b", "#fff", "", "compact"]


def test_continuation_lines(config):
    assert config.get("paths", "motd") == "first line\nsecond line"


def test_defaults_fall_through(config):
    assert config.get("server", "timeout") == "30"
    assert config.get("DEFAULT", "timeout") == "30"
    assert config.keys("paths")[:2] == ["timeout", "debug"]
    assert "root" in config.keys("paths")


class TestTypedGetters:
    def test_get_int(self, config):
        assert config.get_int("server", "port") == 8080
        assert config.get_int("server", "timeout") == 30

    def test_get_int_accepts_prefixes(self):
        cfg = parse_config("[a]\nhex = 0x1F\nbin = 0b101\nneg = -12\n")
        assert cfg.get_int("a", "hex") == 31
        assert cfg.get_int("a", "bin") == 5
        assert cfg.get_int("a", "neg") == -12

    def test_get_int_rejects_text(self, config):
        with pytest.raises(ConfigError, match="not an integer"):
            config.get_int("server", "host")

    def test_get_float(self, config):
        assert config.get_float("server", "ratio") == 0.75
        with pytest.raises(ConfigError, match="not a number"):
            config.get_float("server", "host")

    @pytest.mark.parametrize(
        "word, expected",
        [("yes", True), ("On", True), ("no", False), ("False", False)],
    )
    def test_get_bool_words(self, word, expected):
        cfg = parse_config("[f]\nflag = %s\n" % word)
        assert cfg.get_bool("f", "flag") is expected

    def test_get_bool_numeric_and_upper_case(self):
        cfg = parse_config("[f]\na = 1\nb = TRUE\nc = off\nd = 0\n")
        assert [cfg.get_bool("f", k) for k in "abcd"] == [True, True, False, False]

    def test_get_bool_rejects_other_words(self, config):
        assert config.get_bool("server", "debug") is False
        with pytest.raises(ConfigError, match="not a boolean"):
            config.get_bool("server", "host")

    def test_get_list(self, config):
        assert config.get_list("server", "tags") == ["web", "api", "internal"]

    def test_fallbacks(self, config):
        assert config.get("server", "missing", "dflt") == "dflt"
        assert config.get_int("server", "missing", 5) == 5
        assert config.get_float("server", "missing", 1.5) == 1.5
        assert config.get_bool("server", "missing", True) is True


def test_missing_section_and_key(config):
    with pytest.raises(ConfigError, match="no section 'nope'"):
        config.get("nope", "x")
    with pytest.raises(ConfigError, match="no key 'absent'"):
        config.get("server", "absent")


def test_colon_separator_and_first_separator_wins():
    cfg = parse_config("[s]\nurl: http://h:1/x=y\nexpr = a:b\n")
    assert cfg.get("s", "url") == "http://h:1/x=y"
    assert cfg.get("s", "expr") == "a:b"


def test_set_and_to_dict():
    cfg = parse_config("x = 1\n[one]\na = ${x}${b}\n")
    cfg.set("One", "B", 2)
    assert cfg.to_dict() == {"one": {"x": "1", "a": "12", "b": "2"}}


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("[a]\nkey = 1\nkey = 2\n", 3, "duplicate key"),
        ("[a]\n[b]\n[A]\n", 3, "duplicate section"),
        ("[a\n", 1, "unterminated section header"),
        ("[  ]\n", 1, "empty section name"),
    ],
)
def test_parse_errors(text, line, message):
    with pytest.raises(ParseError) as info:
        parse_config(text)
    assert info.value.position == line
    assert message in info.value.message


def test_malformed_entries():
    with pytest.raises(ParseError, match="expected 'key = value'") as info:
        parse_config("[a]\n# ok\njust words\n")
    assert info.value.position == 3
    with pytest.raises(ParseError, match="empty key") as info:
        parse_config("[a]\n = value\n")
    assert info.value.position == 2


def test_allow_duplicates_keeps_last_value():
    cfg = parse_config("[a]\nk = 1\n[b]\n[a]\nk = 2\n", allow_duplicates=True)
    assert cfg.get("a", "k") == "2"
    assert cfg.sections() == ["a", "b"]


def test_interpolation_errors():
    cfg = parse_config("[a]\nloop = ${loop}\nopen = ${x\nref = ${b:z}\n")
    with pytest.raises(ConfigError, match="too deep"):
        cfg.get("a", "loop")
    with pytest.raises(ConfigError, match="unterminated"):
        cfg.get("a", "open")
    with pytest.raises(ConfigError, match="no section 'b'"):
        cfg.get("a", "ref")


def test_interpolation_depth_limit_allows_long_chains():
    lines = ["[c]", "k0 = end"] + ["k%d = ${k%d}" % (i, i - 1) for i in range(1, 11)]
    cfg = parse_config("\n".join(lines))
    assert cfg.get("c", "k10") == "end"
    cfg.set("c", "k11", "${k10}")
    with pytest.raises(ConfigError, match="too deep"):
        cfg.get("c", "k11")
