// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

@Suite("Glob")
struct GlobTests {
    @Test(
        "patterns that match",
        arguments: [
            ("AB Shutter3*", "AB Shutter3 Keyboard"),
            ("AB Shutter3*", "AB Shutter3"),
            ("*", ""),
            ("*", "anything at all"),
            ("**", "x"),
            ("", ""),
            ("exact", "exact"),
            ("?", "x"),
            ("a?c", "abc"),
            ("???", "📷 x"),
            ("*Keyboard", "AB Shutter3 Keyboard"),
            ("*Shutter*", "AB Shutter3 Consumer Control"),
            ("a*b*c", "a-b-b-c"),
            ("*a*b", "xaxxb"),
            ("a*b", "ab"),
            ("*[0-9]", "Shutter3"),
            ("[abc]", "b"),
            ("[a-c]x", "cx"),
            ("[!a-c]", "d"),
            ("[^a-c]", "d"),
            ("[]]", "]"),
            ("[!]]", "a"),
            ("[a-]", "-"),
            ("[a-]", "a"),
            ("[A-Z][a-z]*", "Logitech"),
            ("[ab", "[ab"),
            ("\\*", "*"),
            ("\\?", "?"),
            ("\\[a]", "[a]"),
            ("a\\", "a\\"),
            ("Shutter\\*3", "Shutter*3"),
        ])
    func matches(_ pattern: String, _ text: String) {
        #expect(
            Glob.matches(pattern: pattern, text), "\(pattern.debugDescription) should match \(text.debugDescription)")
    }

    @Test(
        "patterns that do not match",
        arguments: [
            ("AB Shutter3*", "ab shutter3 keyboard"),  // Case counts.
            ("AB Shutter3*", "AB Shutter"),
            ("AB Shutter3*", "My AB Shutter3"),
            ("", "x"),
            ("exact", "exactly"),
            ("exact", "exac"),
            ("?", ""),
            ("?", "xy"),
            ("a?c", "ac"),
            ("*?", ""),
            ("a*", ""),
            ("*Keyboard", "Keyboard Mouse"),
            ("a*b*c", "a-b-b-"),
            ("[abc]", "d"),
            ("[a-c]", "d"),
            ("[!a-c]", "b"),
            ("[^a-c]", "a"),
            ("[]]", "a"),
            ("[!]]", "]"),
            ("[a-]", "b"),
            ("[ab", "a"),
            ("\\*", "x"),
            ("\\*", "\\*"),
            ("\\?", "x"),
            ("Shutter\\*3", "Shutterx3"),
        ])
    func doesNotMatch(_ pattern: String, _ text: String) {
        #expect(
            !Glob.matches(pattern: pattern, text),
            "\(pattern.debugDescription) should not match \(text.debugDescription)")
    }

    @Test("a star backtracks over a long text without giving up early")
    func longBacktrack() {
        let text = String(repeating: "a", count: 200) + "b"
        #expect(Glob.matches(pattern: "*a*a*a*b", text))
        #expect(!Glob.matches(pattern: "*a*a*a*c", text))
    }
}
