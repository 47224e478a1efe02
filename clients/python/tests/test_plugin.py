# SPDX-License-Identifier: Apache-2.0
"""The pytest plugin, as installed (the pytest11 entry point), run by pytester in a fresh
pytest process per case."""

import sys

if sys.version_info >= (3, 10):
    from importlib.metadata import entry_points
else:  # pragma: no cover - Python 3.9
    from importlib.metadata import entry_points as _eps

    def entry_points(group):
        return _eps().get(group, [])

import pytest

from fakedaemon import click

pytest_plugins = ["pytester"]

PRESS_TEST = """
def test_shutter(expect_press):
    with expect_press(key="KEY_VOLUMEUP", device="AB Shutter3*", timeout=5) as p:
        pass  # the robot presses here
    assert p.ended.phase == "ended"
"""


def run(pytester, *args):
    # A fresh interpreter: the plugin must come from the entry point, not this process.
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    found = [e for e in entry_points(group="pytest11") if e.name == "shutterd"]
    assert [e.value for e in found] == ["shutterd.pytest_plugin"]


def test_help_lists_the_socket_option(pytester):
    result = run(pytester, "--help")
    result.stdout.fnmatch_lines(["*--shutterd-socket=PATH*"])


def test_the_shutterd_fixture_is_a_connected_client_on_the_named_socket(pytester, daemon, monkeypatch):
    monkeypatch.delenv("SHUTTERD_SOCKET", raising=False)
    pytester.makepyfile("""
        import shutterd as lib
        def test_hello(shutterd, shutterd_socket):
            assert isinstance(shutterd, lib.Client)
            assert shutterd.path == shutterd_socket == %r
            assert shutterd.hello.daemon_name == "shutterd"
            shutterd.ping()
    """ % daemon.path)
    run(pytester, "--shutterd-socket", daemon.path).assert_outcomes(passed=1)


def test_the_socket_comes_from_the_environment_else_the_default(pytester, monkeypatch):
    pytester.makepyfile("""
        import os
        def test_socket(shutterd_socket):
            assert shutterd_socket == os.environ.get("WANT")
    """)
    monkeypatch.setenv("SHUTTERD_SOCKET", "/somewhere/else.sock")
    monkeypatch.setenv("WANT", "/somewhere/else.sock")
    run(pytester).assert_outcomes(passed=1)
    monkeypatch.delenv("SHUTTERD_SOCKET")
    monkeypatch.setenv("WANT", "/run/shutterd/shutterd.sock")
    run(pytester).assert_outcomes(passed=1)
    # The option wins over the environment.
    monkeypatch.setenv("SHUTTERD_SOCKET", "/somewhere/else.sock")
    monkeypatch.setenv("WANT", "/opt.sock")
    run(pytester, "--shutterd-socket", "/opt.sock").assert_outcomes(passed=1)


def test_expect_press_passes_when_the_press_comes(pytester, fake):
    f = fake(script=click(1))
    pytester.makepyfile(PRESS_TEST)
    run(pytester, "--shutterd-socket", f.path).assert_outcomes(passed=1)
    assert f.requests[0]["interaction"] == {"primary": True, "secondary": True}


def test_expect_press_fails_naming_the_expected_press_and_what_came_instead(pytester, fake):
    f = fake(script=click(1, key="KEY_ENTER", handler="primary", code=28))
    pytester.makepyfile(PRESS_TEST)
    result = run(pytester, "--shutterd-socket", f.path)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*PressFailed: expected KEY_VOLUMEUP from 'AB Shutter3[*]', got KEY_ENTER from 'AB Shutter3 Keyboard' (primary)"])


def test_expect_press_lists_everything_that_came_by_the_timeout(pytester, fake):
    f = fake(script=[dict(m, phase="cancelled", reason="dropped") if m["phase"] == "ended" else m
                     for m in click(1, key="KEY_VOLUMEDOWN", handler="primary", code=114)]
             + [dict(m, phase="cancelled", reason="dropped") if m["phase"] == "ended" else m
                for m in click(2, key="KEY_ENTER", handler="primary", code=28)])
    pytester.makepyfile("""
        def test_shutter(expect_press):
            with expect_press(key="KEY_VOLUMEUP", timeout=0.5):
                pass
    """)
    result = run(pytester, "--shutterd-socket", f.path)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*PressFailed: expected KEY_VOLUMEUP, got KEY_VOLUMEDOWN from 'AB Shutter3 Keyboard' (primary) (cancelled), "
        "KEY_ENTER from 'AB Shutter3 Keyboard' (primary) (cancelled)"])


def test_expect_press_fails_when_nothing_comes(pytester, daemon):
    pytester.makepyfile("""
        def test_shutter(expect_press):
            with expect_press(key="KEY_CAMERA", device="Cam*"):
                pass
    """)
    result = run(pytester, "--shutterd-socket", daemon.path, "--shutterd-timeout", "0.3")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*PressTimeout: nothing arrived within 0.3 s: no KEY_CAMERA from 'Cam[*]'"])


def test_a_missing_daemon_errors_the_test_with_the_socket_named(pytester, sockdir):
    pytester.makepyfile("""
        def test_needs_daemon(shutterd):
            pass
    """)
    result = run(pytester, "--shutterd-socket", sockdir + "/none.sock")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ConnectError: cannot connect to shutterd at */none.sock*"])


def test_the_plugin_can_be_turned_off(pytester):
    pytester.makepyfile("""
        def test_no_fixture(request):
            assert "expect_press" not in request.fixturenames
    """)
    result = run(pytester, "-p", "no:shutterd", "--fixtures")
    assert "expect_press" not in result.stdout.str()


@pytest.mark.parametrize("bad", ["third"])
def test_a_bad_handler_is_reported(pytester, fake, bad):
    f = fake()
    pytester.makepyfile("""
        def test_h(expect_press):
            with expect_press(key="KEY_VOLUMEUP", handler=%r):
                pass
    """ % bad)
    result = run(pytester, "--shutterd-socket", f.path)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ValueError: handler must be 'primary' or 'secondary', not 'third'"])
