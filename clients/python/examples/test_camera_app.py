# SPDX-License-Identifier: Apache-2.0
"""A camera app's tests against a recorded AB Shutter3: no remote, no root, no /dev/input.

Each test gets a shutterd of its own (the shutterd_replay fixture): its interaction is in
force before the first press plays, so what it sees never depends on timing.
"""

import shutterd
from shutterd.testing import played

REMOTE = "ab-shutter3-volumeup.evemu"  # shipped with the package: two clicks of volume up


def captures(events):
    return [(e.handler, e.phase, e.key.name) for e in events if isinstance(e, shutterd.Capture)]


def test_volume_up_drives_the_secondary_handler(shutterd_replay):
    client = shutterd_replay(REMOTE, speed=0)
    click = [("secondary", "began", "KEY_VOLUMEUP"), ("secondary", "ended", "KEY_VOLUMEUP")]
    assert captures(played(client)) == click * 2


def test_without_a_secondary_handler_volume_up_falls_through_to_primary(shutterd_replay):
    client = shutterd_replay(REMOTE, secondary=False, speed=0)
    click = [("primary", "began", "KEY_VOLUMEUP"), ("primary", "ended", "KEY_VOLUMEUP")]
    assert captures(played(client)) == click * 2


def test_the_shutter_press_reaches_the_primary_handler(shutterd_replay):
    client = shutterd_replay(REMOTE, secondary=False, speed=0)
    press = client.wait_for_press("KEY_VOLUMEUP", device="AB Shutter3*", handler="primary", timeout=10)
    assert press.began.device.replayed and press.began.press == press.ended.press


def test_a_filter_on_another_device_sees_no_press(shutterd_replay):
    client = shutterd_replay(REMOTE, names=["Griffin PowerMate*"], speed=0)
    assert captures(played(client)) == []


def test_the_clicks_make_a_double_press_and_the_second_a_long_one(shutterd_replay):
    # At the recorded timing (the clicks are 301 ms apart, the second held 206 ms), judged
    # by the recording's own times: the same on a loaded machine.
    client = shutterd_replay(REMOTE, double_press=400, long_press=150)
    gestures = [e.gesture for e in played(client) if isinstance(e, shutterd.Gesture)]
    assert gestures == ["doublePress", "longPress"]


def test_a_long_press_then_a_double_press_at_the_readme_thresholds(shutterd_replay):
    # Held 0.8 s, then two clicks 0.1 s apart: shutterctl watch --long-press 500
    # --double-press 300 sees the same.
    client = shutterd_replay("ab-shutter3-long-and-double.evemu", long_press=500, double_press=300)
    gestures = [(e.gesture, e.first_press) for e in played(client) if isinstance(e, shutterd.Gesture)]
    assert gestures == [("longPress", None), ("doublePress", 2)]


def test_a_remote_gone_mid_press_cancels_the_press(shutterd_replay):
    client = shutterd_replay("ab-shutter3-disconnect-mid-press.evemu", speed=0)
    events = played(client)
    phases = [(e.phase, e.reason) for e in events if isinstance(e, shutterd.Capture)]
    assert phases == [("began", None), ("cancelled", "removed")]
    assert isinstance(events[-1], shutterd.DeviceRemoved)


def test_the_half_press_makes_the_controls_active_around_the_capture(shutterd_replay):
    client = shutterd_replay("gpio-keys-focus-and-shutter.evemu", speed=0)
    seen = [e.event if isinstance(e, shutterd.Control) else e.phase for e in played(client)
            if isinstance(e, (shutterd.Control, shutterd.Capture))]
    assert seen == ["active", "began", "ended", "inactive"]
