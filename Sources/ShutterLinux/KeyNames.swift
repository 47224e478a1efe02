import CEvdev

/// libevdev's names for event codes.
package enum KeyNames {
    /// The name of a code ("KEY_VOLUMEUP"), or "EV_0x01_0x2a3" style when libevdev has none.
    package static func name(type: UInt16, code: UInt16) -> String {
        if let p = libevdev_event_code_get_name(UInt32(type), UInt32(code)) { return String(cString: p) }
        return "CODE_\(type)_0x\(String(code, radix: 16))"
    }

    /// The code of a key or button name ("KEY_ENTER", "BTN_0").
    package static func keyCode(_ name: String) -> UInt16? {
        let r = libevdev_event_code_from_name(UInt32(EV_KEY), name)
        return r < 0 ? nil : UInt16(r)
    }
}
