// SPDX-License-Identifier: Apache-2.0

/// Which config file shutterd and shutterd-mqtt read: the file named by `--config` or else
/// by `$SHUTTERD_CONFIG` (empty is unset), which was meant to be read, so that any failure
/// to read it stops the program; or else the built-in default, whose absence (nothing
/// there, not even a link to nothing) means the defaults. One that is there but cannot be
/// read (its mode, a directory, too large, not UTF-8) may hold allow-lists, so that stops
/// the program too. Pure: the program reads the file (ShutterSys's
/// `readTextFile(_:absentIsNil:)`).
package struct ConfigFile: Equatable, Sendable {
    package static let defaultPath = "/etc/shutterd/shutterd.conf"
    /// The environment variable that names the config file when `--config` does not.
    package static let environmentVariable = "SHUTTERD_CONFIG"

    package var path: String
    /// Whether nothing at `path` means the defaults: only for the built-in default.
    package var absentMeansDefaults: Bool

    /// `option` is `--config`'s value, `environment` `$SHUTTERD_CONFIG`'s.
    package init(option: String?, environment: String?, defaultPath: String = ConfigFile.defaultPath) {
        if let named = option ?? environment.flatMap({ $0.isEmpty ? nil : $0 }) {
            path = named
            absentMeansDefaults = false
        } else {
            path = defaultPath
            absentMeansDefaults = true
        }
    }
}
