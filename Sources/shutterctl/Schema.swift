// SPDX-License-Identifier: Apache-2.0

import ShutterCore

import enum ShutterEvdev.KeyNames

let schemaUsage = """
    Usage: shutterctl schema

    Prints the protocol's message types, their fields and the device object's properties as
    one JSON document: for each field its kind (string, int, bool, device, key, devices,
    object, interaction, any), whether every message has it (always, sometimes, or
    omittedWhen a value), the values of a closed set, and a line of documentation; then
    libevdev's names of the key codes and of the relative axes' codes (keyNames, axisNames:
    code to name), with which a client names the key of a compact event. The client
    libraries' message types and name tables are generated from it (make generate). Needs no
    daemon.
    """

@MainActor func schemaCommand() -> Int32 {
    if args.contains("--help") || args.contains("-h") {
        out(schemaUsage)
        return 0
    }
    rejectLeftovers(schemaUsage)
    out(schemaJSON().serialized)
    return 0
}

/// Schema.json, and libevdev's names for the codes a compact event carries: the keys' and
/// the relative axes' (a slider's), code (in decimal) to name, as the daemon names them.
func schemaJSON() -> JSON {
    guard case .object(var members) = Schema.json else { return Schema.json }
    let names = { (table: [(code: UInt16, name: String)]) in
        JSON.object(table.map { (String($0.code), .string($0.name)) })
    }
    members.append(("keyNames", names(KeyNames.keyTable())))
    members.append(("axisNames", names(KeyNames.axisTable())))
    return .object(members)
}
