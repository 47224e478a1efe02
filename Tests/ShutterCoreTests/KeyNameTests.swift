// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// Key names held once for the process (`KeyName`): what an occurrence carries instead of a
/// string, compared by where their bytes are.
@Suite("KeyName")
struct KeyNameTests {
    @Test("a text is held once: the same text is the same name, another text another, and each gives its text back")
    func heldOnce() {
        let a = KeyName("KEY_VOLUMEUP")
        let b = KeyName(String("KEY_VOLUME") + "UP")
        let c = KeyName("KEY_VOLUMEDOWN")
        #expect(a == b && a.bytes.baseAddress == b.bytes.baseAddress)
        #expect(a != c && a.hashValue == b.hashValue)
        #expect(a.string == "KEY_VOLUMEUP" && c.description == "KEY_VOLUMEDOWN")
        #expect(Set([a, b, c]).count == 2)
        // Longer than a string holds in place, and empty.
        let long = String(repeating: "BTN_TRIGGER_HAPPY", count: 4)
        #expect(KeyName(long).string == long && KeyName(long) == KeyName(long))
        #expect(KeyName("").string.isEmpty && KeyName("") == KeyName(""))
    }

    @Test("a filter's key names, which a client sends, are compared byte for byte and never held")
    func filterHoldsNothing() throws {
        let name = KeyName("KEY_ENTER")
        let filter = try Interaction(request: JSON.parse(#"{"filter":{"keys":["KEY_UNHEARD_OF_1","KEY_ENTER"]}}"#))
            .filter
        #expect(filter.matches(FanoutTests.remote, key: name))
        #expect(!filter.matches(FanoutTests.remote, key: KeyName("KEY_VOLUMEUP")))
        #expect(name.matches("KEY_ENTER") && !name.matches("KEY_ENTE") && !name.matches("KEY_ENTERS"))
        #expect(!KeyName.isHeld("KEY_UNHEARD_OF_1"), "the client's name was not added")
        #expect(KeyName.isHeld("KEY_ENTER"))
    }

    @Test("an event line writes a name's bytes as JSON does the text, escaped where the text needs it")
    func written() throws {
        for text in ["KEY_CAMERA_FOCUS", #"odd "name"\"#, "tab\there"] {
            var fromBytes: [UInt8] = []
            JSON.writeString(KeyName(text).bytes, into: &fromBytes)
            var fromText: [UInt8] = []
            JSON.writeString(text, into: &fromText)
            #expect(fromBytes == fromText, "\(text)")
            #expect(try JSON.parse(String(decoding: fromBytes, as: UTF8.self)) == .string(text))
        }
    }
}
