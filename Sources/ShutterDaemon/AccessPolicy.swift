// SPDX-License-Identifier: Apache-2.0

import ShutterCore
import ShutterSys

/// Who may connect and who may grab, from the config's user and group lists.
package struct AccessPolicy {
    var allowUIDs: Set<UInt32> = []
    var allowGIDs: Set<UInt32> = []
    var grabUIDs: Set<UInt32> = [0]
    var grabGIDs: Set<UInt32> = []
    var restricted: Bool

    package init(_ config: Config) {
        restricted = !config.allowUsers.isEmpty || !config.allowGroups.isEmpty
        allowUIDs = Set(config.allowUsers.compactMap(Self.uid))
        allowGIDs = Set(config.allowGroups.compactMap(Self.gid))
        grabUIDs.formUnion(config.grabUsers.compactMap(Self.uid))
        grabGIDs = Set(config.grabGroups.compactMap(Self.gid))
        if restricted { allowUIDs.insert(0) }
    }

    static func uid(_ s: String) -> UInt32? {
        if let n = UInt32(s) { return n }
        do {
            if let uid = try Sys.userID(s) { return uid }
            Log.error("config: unknown user '\(s)', ignoring")
        } catch {
            Log.error("config: cannot look up user '\(s)': \(error), ignoring")
        }
        return nil
    }

    static func gid(_ s: String) -> UInt32? {
        if let n = UInt32(s) { return n }
        do {
            if let gid = try Sys.groupID(s) { return gid }
            Log.error("config: unknown group '\(s)', ignoring")
        } catch {
            Log.error("config: cannot look up group '\(s)': \(error), ignoring")
        }
        return nil
    }

    /// The peer's primary group and the supplementary groups of its user; its primary group
    /// alone when its user cannot be looked up (said).
    static func groups(of peer: PeerCredentials) -> Set<UInt32> {
        do {
            return Set(try Sys.groups(ofUser: peer.uid, primary: peer.gid)).union([peer.gid])
        } catch {
            Log.error(
                "cannot look up the groups of uid \(peer.uid) (pid \(peer.pid)): \(error); its primary group \(peer.gid) alone counts"
            )
            return [peer.gid]
        }
    }

    /// Whether a client whose credentials the kernel did not give may connect: only when
    /// no allow-users or allow-groups list says who may.
    var admitsUnknown: Bool { !restricted }

    func mayConnect(_ peer: PeerCredentials) -> Bool {
        guard restricted else { return true }
        return allowUIDs.contains(peer.uid) || !Self.groups(of: peer).isDisjoint(with: allowGIDs)
    }

    func mayGrab(_ peer: PeerCredentials) -> Bool {
        grabUIDs.contains(peer.uid) || (!grabGIDs.isEmpty && !Self.groups(of: peer).isDisjoint(with: grabGIDs))
    }
}
