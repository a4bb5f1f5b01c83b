import pytest

from tinyparse import parse_config

SAMPLE_CONFIG = """\
# global defaults
timeout = 30
debug = no

[Server]
host = example.org
port = 8080
base_url = http://${host}:${port}
ratio = 0.75   ; trailing comment
tags = web, api , ,internal

[paths]
root = /srv/app
logs = ${root}/logs
static = ${paths:root}/static
greeting = "hello # not a comment"
motd = first line
    second line
price = $$5
"""


@pytest.fixture
def sample_text():
    return SAMPLE_CONFIG


@pytest.fixture
def config(sample_text):
    return parse_config(sample_text)
