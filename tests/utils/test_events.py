"""utils/events.py: what the engines say is a record of the ``cupid.events`` logger, one line on
the current stderr by default, a caller's callback's instead when routed, and never twice."""
from __future__ import annotations

import io
import logging
import sys

from cupid.utils import events
from cupid.utils.events import Event


def test_by_default_an_event_is_one_line_on_the_current_stderr(capsys):
    events.note("3 of 6 instances already done")
    events.warning("data.jsonl: row 2 has 7 prior sessions")
    events.progress("[2/6] 1 failed")
    assert capsys.readouterr().err == ("3 of 6 instances already done\n"
                                       "warning: data.jsonl: row 2 has 7 prior sessions\n[2/6] 1 failed\n")


def test_routed_events_go_to_the_callback_and_the_log_only(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "placeholder-secret-for-the-redaction-test")
    received: list[Event] = []
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handlers = list(events.EVENTS.handlers)
    with events.routed(received.append, handler):
        events.note("note one")
        events.warning("key placeholder-secret-for-the-redaction-test refused")
    assert received == [Event("note", "note one"), Event("warning", received[1].message)]
    assert "placeholder-secret-for-the-redaction-test" not in received[1].message  # keys are masked
    assert capsys.readouterr().err == ""
    assert log.getvalue().startswith("note one\n")
    assert events.EVENTS.handlers == handlers  # put back
    events.note("after")
    assert capsys.readouterr().err == "after\n" and len(received) == 2


def test_events_do_not_reach_a_callers_root_handlers(capsys):
    """A notebook's ``logging.basicConfig`` would print each event a second time."""
    root = logging.getLogger()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root.addHandler(handler)
    try:
        events.warning("once")
    finally:
        root.removeHandler(handler)
    assert stream.getvalue() == "" and capsys.readouterr().err == "warning: once\n"


def test_the_default_line_follows_a_replaced_stderr(monkeypatch):
    replaced = io.StringIO()
    monkeypatch.setattr(sys, "stderr", replaced)
    events.note("to the replacement")
    assert replaced.getvalue() == "to the replacement\n"
