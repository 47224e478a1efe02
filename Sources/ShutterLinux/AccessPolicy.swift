import Glibc
import ShutterCore

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
        if let pw = getpwnam(s) { return pw.pointee.pw_uid }
        Log.error("config: unknown user '\(s)', ignoring")
        return nil
    }

    static func gid(_ s: String) -> UInt32? {
        if let n = UInt32(s) { return n }
        if let gr = getgrnam(s) { return gr.pointee.gr_gid }
        Log.error("config: unknown group '\(s)', ignoring")
        return nil
    }

    /// The peer's primary group and the supplementary groups of its user.
    static func groups(of peer: PeerCredentials) -> Set<UInt32> {
        var result: Set<UInt32> = [peer.gid]
        guard let pw = getpwuid(peer.uid) else { return result }
        // When the list does not fit, getgrouplist returns -1 and sets `count` to the size it
        // needs: grow the list and ask again (the group file may change in between).
        var list = [gid_t](repeating: 0, count: 64)
        while true {
            var count = Int32(list.count)
            if getgrouplist(pw.pointee.pw_name, peer.gid, &list, &count) >= 0 {
                result.formUnion(list.prefix(Int(count)))
                return result
            }
            // More than Linux's NGROUPS_MAX (65536) is not a size but a fault: no groups then.
            guard list.count <= 65536 else { return result }
            list = [gid_t](repeating: 0, count: max(Int(count), list.count * 2))
        }
    }

    func mayConnect(_ peer: PeerCredentials) -> Bool {
        guard restricted else { return true }
        return allowUIDs.contains(peer.uid) || !Self.groups(of: peer).isDisjoint(with: allowGIDs)
    }

    func mayGrab(_ peer: PeerCredentials) -> Bool {
        grabUIDs.contains(peer.uid) || (!grabGIDs.isEmpty && !Self.groups(of: peer).isDisjoint(with: grabGIDs))
    }
}
