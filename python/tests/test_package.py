"""The package as shipped: it parses as Python 3.9 (its oldest supported
version; the tests run on Debian's newer one) and loads its library from
where its documentation says."""

import ast
import os

import pytest

import grammard
from grammard import _native

PACKAGE = os.path.dirname(grammard.__file__)


@pytest.mark.parametrize("name", sorted(
    f for f in os.listdir(PACKAGE) if f.endswith(".py")))
def test_parses_as_python_3_9(name):
    with open(os.path.join(PACKAGE, name), encoding="utf-8") as f:
        ast.parse(f.read(), name, feature_version=(3, 9))


def test_library_location(monkeypatch, tmp_path):
    monkeypatch.setenv("GRAMMARD_CLIENT_LIBRARY", "/x/lib.so")
    assert _native.library_path() == "/x/lib.so"
    monkeypatch.delenv("GRAMMARD_CLIENT_LIBRARY")
    assert _native.library_path() in (
        os.path.join(PACKAGE, _native.LIBRARY_NAME), _native.LIBRARY_NAME)
