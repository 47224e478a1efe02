// SPDX-License-Identifier: Apache-2.0

import Glibc

/// Test helpers to read the stream files (the pure module has no file access of its own).
enum Files {
    static func read(_ path: String) -> String {
        guard let f = fopen(path, "r") else { fatalError("cannot open \(path)") }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n == 0 { break }
            bytes.append(contentsOf: buf[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func list(_ dir: String) -> [String] {
        guard let d = opendir(dir) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafePointer(to: e.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names
    }
}
