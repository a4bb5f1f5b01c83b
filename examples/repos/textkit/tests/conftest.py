import pytest

LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do "
    "eiusmod tempor incididunt ut labore et dolore magna aliqua."
)


@pytest.fixture
def lorem():
    return LOREM


class User:
    def __init__(self, name, email):
        self.name = name
        self.email = email


@pytest.fixture
def context():
    return {
        "user": User("ada lovelace", "ada@example.org"),
        "site": {"name": "Analytical", "visits": 42},
        "empty": None,
        "items": [1, 2, 3],
    }
