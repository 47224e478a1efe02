// SPDX-License-Identifier: Apache-2.0

import ShutterCore

let schemaUsage = """
    Usage: shutterctl schema

    Prints the protocol's message types, their fields and the device object's properties as
    one JSON document: for each field its kind (string, int, bool, device, key, devices,
    object, interaction, any), whether every message has it (always, sometimes, or
    omittedWhen a value), the values of a closed set, and a line of documentation. The
    Python client's message classes are generated from it (make generate). Needs no daemon.
    """

@MainActor func schemaCommand() -> Int32 {
    if args.contains("--help") || args.contains("-h") {
        out(schemaUsage)
        return 0
    }
    rejectLeftovers(schemaUsage)
    out(Schema.json.serialized)
    return 0
}
