# SPDX-License-Identifier: Apache-2.0
"""Last: the daemon survived everything before."""
from harness import check, scenario


@scenario("daemon-alive")
def sc_alive(rig):
    """shutterd is still running after all of the above, and answers ping."""
    check(rig.daemon.alive(), "shutterd exited with %s" % rig.daemon.proc.returncode)
    c = rig.client("ping")
    c.request("ping")
    return "pid %d answers ping" % rig.daemon.proc.pid
