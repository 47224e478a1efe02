# SPDX-License-Identifier: Apache-2.0
"""A rig test as its users write them, with the shutterd package's pytest plugin: the robot
presses the remote's shutter button, and the test passes when shutterd reports that press.

scenarios.py runs it in the rig's guest with the package installed in a venv, once with the
iOS button pressed (KEY_VOLUMEUP: it passes) and once with the Android button (KEY_ENTER: it
fails, naming both keys). The robot asks scenarios.py, on the socket in
$SHUTTERD_RIG_ROBOT, to press the button of the real uhid AB Shutter3 it made.
"""

import os
import socket


class Robot:
    def press_shutter(self):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(os.environ["SHUTTERD_RIG_ROBOT"])
            s.sendall(b"press\n")
            assert s.makefile().readline().strip() == "done", "the rig did not press the button"


robot = Robot()


def test_shutter_button(expect_press):
    with expect_press(key="KEY_VOLUMEUP", device="AB Shutter3*"):
        robot.press_shutter()
