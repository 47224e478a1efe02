// SPDX-License-Identifier: Apache-2.0

import ShutterBridge
import ShutterCore
import ShutterMQTT
import ShutterSys

/// The spool and the place on disk, in the state directory: `spool` (SpoolFile's format),
/// appended to and fsync'd before an event counts as held, and replaced whole (written
/// beside it, fsync'd, renamed over it, the directory fsync'd) to drop what the broker
/// acknowledged; `place` (one JSON line) replaced the same way. A write that fails is logged
/// and the bridge goes on with its spool in memory only.
final class SpoolStore {
    let directory: String
    var spoolPath: String { directory + "/spool" }
    var placePath: String { directory + "/place" }
    /// The spool file, open for appending; nil once writing failed.
    var fd: Int32?
    /// The directory, open and locked (flock) for as long as the bridge runs: one bridge
    /// per state directory.
    let lock: FileDescriptor
    /// Bytes in the file that no longer count: acknowledged, dropped, or sent at QoS 0.
    var dead = 0
    /// Writing failed once: memory only from then on.
    var failed = false
    /// How much of the spool file is read back: twice the spool's bound and a MiB (what is
    /// held, and as much dead before a rewrite), 1 GiB at least. A larger file is damage: its
    /// whole records up to this are kept, and what is past it is said (`cut`).
    let limit: Int
    /// The bytes of the file past `limit` that were not read when it was loaded.
    private(set) var cut = 0
    /// `place.spare`: room taken for a place (`spareBytes`), for `abandon` to write the
    /// place through when the disk has none left.
    var sparePath: String { directory + "/place.spare" }
    var spareReady = false
    static let spareBytes = 4096

    init(directory: String, spoolBytes: Int = 16 << 20) throws(BridgeError) {
        self.directory = directory
        limit = Swift.max(1 << 30, spoolBytes * 2 + (1 << 20))
        var locked = false
        do {
            lock = FileDescriptor(try Sys.open(directory, Sys.readOnly | Sys.directoryOnly))
            locked = try Sys.lockExclusive(lock.raw, directory)
        } catch {
            throw BridgeError("the state directory: \(error)")
        }
        guard locked else { throw BridgeError("the state directory \(directory) is in use by another shutterd-mqtt") }
    }

    /// What the directory held: the place, and the spool's entries not yet acknowledged
    /// (damage past its whole records logged and dropped: `StateFiles.read`). The file is
    /// written again with exactly those, and opened for appending.
    func load() -> (place: Place, entries: [Spool.Entry]) {
        var placeBytes: [UInt8]?
        do {
            placeBytes = try Sys.readFile(placePath, limit: 65_536)
        } catch  where error.errno == Errno.ENOENT {
        } catch {
            Log.error("spool: \(error); starting without a place")
        }
        var spool: (bytes: [UInt8], whole: Bool)?
        do {
            spool = try Sys.readPrefix(spoolPath, limit: limit)
        } catch  where error.errno == Errno.ENOENT {
        } catch {
            Log.error("spool: \(error); starting with an empty spool")
        }
        let size = spool.map { $0.whole ? $0.bytes.count : ((try? Sys.status(spoolPath)).map { Int($0.size) } ?? 0) }
        let state = StateFiles.read(
            place: placeBytes, spool: spool?.bytes, size: size ?? 0, directory: directory, limit: limit)
        for (line, error) in state.notes { error ? Log.error(line) : Log.info(line) }
        cut = state.cut
        if state.place.unsure != nil {
            // The mark (an empty spool file) goes with the rewrite: kept in the place first.
            do {
                try Sys.replaceFile(placePath, Array(state.place.serialized.utf8), directory: directory)
            } catch {
                Log.error("spool: \(error)")
            }
        }
        rewrite(state.entries)
        makeSpare()
        return (state.place, state.entries)
    }

    /// Takes the room of a place beside it (`place.spare`): writing into room a file has
    /// needs none, so that a full disk does not stop the place that says what was dropped.
    func makeSpare() {
        do {
            let fd = try Sys.open(sparePath, Sys.writeOnly | Sys.create | Sys.noFollow, mode: 0o600)
            defer { Sys.close(fd) }
            try Sys.allocateFile(fd, Self.spareBytes, sparePath)
            try Sys.syncFile(fd, sparePath)
            spareReady = true
        } catch {
            spareReady = false
            Log.error("spool: \(error): no room kept for the place (a full disk may then lose what it would say)")
        }
    }

    /// Appends `entries` and fsyncs: once this returns they survive a crash.
    func append(_ entries: [Spool.Entry]) {
        guard let fd, !failed, !entries.isEmpty else { return }
        var bytes: [UInt8] = []
        for e in entries { bytes += SpoolFile.encode(e) }
        do {
            try Sys.writeAll(fd, bytes)
            try Sys.syncFile(fd, spoolPath)
        } catch {
            give(up: error)
        }
    }

    /// Replaces the file with one holding exactly `entries`.
    func rewrite(_ entries: [Spool.Entry]) {
        guard !failed else { return }
        if let fd {
            Sys.close(fd)
            self.fd = nil
        }
        var bytes = SpoolFile.header
        for e in entries { bytes += SpoolFile.encode(e) }
        do {
            try Sys.replaceFile(spoolPath, bytes, directory: directory)
            fd = try Sys.open(spoolPath, Sys.writeOnly | Sys.appendOnly | Sys.noFollow)
            dead = 0
        } catch {
            give(up: error)
        }
    }

    func savePlace(_ place: Place) {
        guard fd != nil, !failed else { return }
        do {
            try Sys.replaceFile(placePath, Array(place.serialized.utf8), directory: directory)
        } catch {
            give(up: error)
        }
    }

    /// A write failed (a full disk, an I/O error): the spool stays in memory only (the
    /// bridge then abandons the files: `abandon`).
    func give(up error: SystemError) {
        Log.error("spool: \(error); the spool is in memory only from now on")
        failed = true
    }

    /// `place` written through the room kept for it (`makeSpare`), then the spool's file cut
    /// to nothing (ftruncate needs no room; an empty file is the mark, `StateFiles.read`)
    /// and fsync'd, then, without a spare, `place` written if it can be now: a stop then
    /// leaves no record that disagrees with what the bridge publishes from memory.
    func abandon(_ place: Place) {
        // The place first, through the room kept for it: a kill before the spool's file is
        // cut leaves the old records with a place that says they may come again.
        let bytes = Array(place.serialized.utf8)
        var placed = false
        if spareReady && bytes.count <= Self.spareBytes {
            do {
                let spare = try Sys.open(sparePath, Sys.writeOnly | Sys.noFollow)
                defer { Sys.close(spare) }
                try Sys.writeAll(spare, bytes)
                try Sys.truncateFile(spare, bytes.count, sparePath)
                try Sys.syncFile(spare, sparePath)
                try Sys.renameFile(sparePath, placePath)
                try Sys.syncDirectory(directory)
                placed = true
            } catch {
                Log.error("spool: \(error)")
            }
            spareReady = false
        }
        // A failed rewrite closed it: opened again (opening needs no room).
        if fd == nil { fd = try? Sys.open(spoolPath, Sys.writeOnly | Sys.noFollow) }
        if let fd {
            do {
                try Sys.truncateFile(fd, 0, spoolPath)
                try Sys.syncFile(fd, spoolPath)
            } catch {
                Log.error("spool: \(error)")
            }
            Sys.close(fd)
            self.fd = nil
        }
        guard !placed else { return }
        do {
            try Sys.replaceFile(placePath, bytes, directory: directory)
        } catch {
            Log.error("spool: \(error): the place could not be written either")
        }
    }
}
