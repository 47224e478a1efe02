// SPDX-License-Identifier: Apache-2.0

import ShutterCore
import ShutterSys

/// The grab of each open device (EVIOCGRAB, through libevdev), decided by
/// `Admission.grabAction` from whether a client wishes it grabbed, whether it is, and whether
/// a key is held. The daemon registers each device it opens and looks at one again when its
/// keys are released, and every device when a plan of the fan-out's says grab wishes may
/// have changed (`ClientHub.Intents.grabsChanged`).
package final class Grabs {
    let engine: Engine
    // Read when a plan says grab wishes changed, on the loop's one thread, never across a
    // call that changes it: no runtime exclusivity check.
    @exclusivity(unchecked) private(set) var devices: [Int: Daemon.OpenDevice] = [:]

    /// Where the lines of grabs and releases go: a client's wish causes them, so the hub
    /// bounds them as its other lines clients cause (`ClientHub.peerLine`).
    var log: (String) -> Void = { Log.info($0) }

    package init(engine: Engine) { self.engine = engine }

    func add(_ device: Daemon.OpenDevice) { devices[device.handle] = device }

    func remove(_ handle: Int) { devices[handle] = nil }

    /// Grabs the device when an enabled interaction asks for it (`wanted`) and no key is held
    /// (mapped or not, by libevdev's state), and releases it when none asks.
    func update(_ device: Daemon.OpenDevice, wanted: Bool) {
        let action = Admission.grabAction(
            wanted: wanted, grabbed: device.evdev.grabbed,
            anyKeyDown: engine.heldCount(device.handle) > 0 || device.evdev.anyKeyDown)
        device.grabPending = action == .waitForRelease
        let label = "\(device.evdev.nodeName) - \(device.info.name)"
        switch action {
        case .grab:
            do {
                try device.evdev.grab(true)
                log("\(label): grabbed")
            } catch {
                Log.error("\(label): grab failed: \(error), ignoring")
            }
        case .release:
            do {
                try device.evdev.grab(false)
                log("\(label): released")
            } catch {
                Log.error("\(label): release of the grab failed: \(error)")
            }
        case .waitForRelease, .nothing:
            break
        }
    }

    /// Every device again; `wanted` says which a client wishes grabbed.
    func updateAll(wanted: (DeviceInfo) -> Bool) {
        for device in devices.values { update(device, wanted: wanted(device.info)) }
    }
}
