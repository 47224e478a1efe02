// SPDX-License-Identifier: Apache-2.0

// libFuzzer target over the parsers of the pure core: request lines, JSON and the config
// file. Built by Tests/fuzz/build.sh together with the sources of ShutterCore (one module),
// as one binary linked under three names; the name it is run under picks the parser:
//
//   fuzz-request   RequestLine.parse on one request line
//   fuzz-json      JSON.parse
//   fuzz-config    Config(text:keyCode:)
//
// Beyond "never traps", each checks properties that must hold for every input; a broken
// property stops the run with a message naming it (libFuzzer saves the input as crash-*).

#if canImport(Glibc)
    import Glibc
#endif

enum Parser: String {
    case request, json, config
}

nonisolated(unsafe) var parser = Parser.json

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> CInt {
    let arg0 = argv.pointee?.pointee.map { String(cString: $0) } ?? ""
    let base = arg0.split(separator: "/").last.map(String.init) ?? arg0
    guard base.hasPrefix("fuzz-"), let p = Parser(rawValue: String(base.dropFirst(5))) else {
        fputs("run this binary as fuzz-request, fuzz-json or fuzz-config (it is named '\(base)')\n", stderr)
        exit(2)
    }
    parser = p
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    switch parser {
    case .request: checkRequest(bytes)
    case .json: checkJSON(bytes)
    case .config: checkConfig(String(decoding: bytes, as: UTF8.self))
    }
    return 0
}

/// Stops the run: a property does not hold for this input.
func broken(_ property: String, _ detail: @autoclosure () -> String = "") -> Never {
    let d = detail()
    fatalError("property broken: \(property)\(d.isEmpty ? "" : ": " + d)")
}

/// Whether `line` holds a control character that JSON must escape (below 0x20), other than
/// one final "\n".
func hasRawControl(_ line: [UInt8]) -> Bool {
    line.dropLast(line.last == 0x0A ? 1 : 0).contains { $0 < 0x20 }
}

// MARK: - JSON

func checkJSON(_ bytes: [UInt8]) {
    let value: JSON
    do {
        value = try JSON.parse(bytes)
    } catch {
        guard error.offset >= 0 && error.offset <= bytes.count else {
            broken("an error's offset lies within the input", "\(error.offset) of \(bytes.count)")
        }
        return
    }
    // Everything outside strings is ASCII and strings are checked: accepted text is UTF-8.
    guard String(validating: bytes, as: UTF8.self) != nil else { broken("accepted JSON is valid UTF-8") }
    checkRoundTrip(value)
}

/// A parsed value writes as one line of text that parses back to an equal value and
/// writes again to the same text.
func checkRoundTrip(_ value: JSON) {
    var out: [UInt8] = []
    value.write(into: &out)
    if hasRawControl(out) || out.contains(0x0A) {
        broken("written JSON has no raw control character", value.serialized)
    }
    let again: JSON
    do {
        again = try JSON.parse(out)
    } catch {
        broken("written JSON parses", "\(error) in \(value.serialized)")
    }
    guard again == value else { broken("written JSON parses to an equal value", value.serialized) }
    guard again.serialized.utf8.elementsEqual(out) else {
        broken("writing is a fixed point", "\(value.serialized) then \(again.serialized)")
    }
}

// MARK: - Request lines

func checkRequest(_ line: [UInt8]) {
    let json = try? JSON.parse(line)
    switch RequestLine.parse(line) {
    case .success(let parsed):
        guard let json, case .object = json else { broken("an accepted request is a JSON object") }
        guard json["type"]?.stringValue == parsed.request.name else {
            broken("an accepted request is of the type it names", parsed.request.name)
        }
        if case .resume(let instance, let seq, let open) = parsed.request {
            // Only a run's name, and the seq as the client wrote it.
            guard RunInstance.isName(instance), json["instance"]?.stringValue == instance,
                json["seq"]?.intValue == Int64(seq)
            else { broken("a resume holds the instance and seq written", "\(instance) \(seq)") }
            // The presses it holds: those written, each once, in their order, at most the limit.
            let written = (json["open"]?.arrayValue ?? []).compactMap { $0["press"]?.intValue.map(UInt64.init) }
            var once: [UInt64] = []
            for p in written where !once.contains(p) { once.append(p) }
            guard open.map(\.press) == once, open.count <= ClientOpenPress.limit, open.allSatisfy({ $0.press >= 1 })
            else {
                broken("a resume holds the presses written", "\(open) of \(json.serialized)")
            }
        }
        if case .setInteraction(let interaction) = parsed.request {
            // What the reply says is in force reads back as the same interaction.
            do {
                let back = try Interaction(request: interaction.json)
                guard back == interaction else {
                    broken("an interaction reads back equal", interaction.json.serialized)
                }
            } catch {
                broken("an interaction's JSON reads back", "\(error.message) in \(interaction.json.serialized)")
            }
        }
    case .failure(let e):
        let object: JSON? = if case .object = json { json } else { nil }
        if object == nil, e.code != .invalidJSON {
            broken("a line that is not a JSON object gets invalidJSON", e.code.rawValue)
        }
        if e.code == .lineTooLong || e.code == .notPermitted {
            broken("the parser reports only invalidJSON, unknownRequest or invalidRequest", e.code.rawValue)
        }
        checkErrorLine(Message.error(e), e, request: object)
    }
}

/// The error sent for a bad request is one line of JSON, without raw control characters,
/// that says what the error says and echoes the request's own id.
func checkErrorLine(_ line: [UInt8], _ e: RequestError, request: JSON?) {
    guard line.last == 0x0A, !line.dropLast().contains(0x0A) else { broken("an error message is one line") }
    guard !hasRawControl(line) else {
        broken("an error line has no raw control character", String(decoding: line, as: UTF8.self))
    }
    let sent: JSON
    do {
        sent = try JSON.parse(line.dropLast())
    } catch {
        broken("an error line is JSON", "\(error)")
    }
    guard sent["type"] == .string("error"), sent["code"] == .string(e.code.rawValue),
        sent["message"] == .string(e.message)
    else { broken("an error line says its type, code and message", sent.serialized) }
    if let id = sent["id"], id != request?["id"] {
        broken("an error echoes the request's id", "\(sent.serialized) for id \(request?["id"]?.serialized ?? "none")")
    }
}

// MARK: - Config

/// A few libevdev names, so that key lists can be accepted as well as refused.
let keyCodes: [String: UInt16] = [
    "KEY_ENTER": 28, "KEY_A": 30, "KEY_VOLUMEDOWN": 114, "KEY_VOLUMEUP": 115, "KEY_PLAYPAUSE": 164,
    "KEY_NEXTSONG": 163, "KEY_CAMERA": 212, "KEY_MEDIA": 226, "BTN_0": 0x100, "BTN_LEFT": 0x110,
    "KEY_CAMERA_FOCUS": 0x210,
]

enum ConfigResult: Equatable {
    case config(Config)
    case error(ConfigError)
}

func parseConfig(_ text: String) -> ConfigResult {
    do {
        return .config(try Config(text: text, keyCode: { keyCodes[$0] }))
    } catch {
        return .error(error)
    }
}

func checkConfig(_ text: String) {
    let result = parseConfig(text)
    let lines = text.unicodeScalars.count(where: { $0 == "\n" }) + 1
    if case .error(let e) = result, let n = e.line, n < 1 || n > lines {
        broken("a config error names a line of the file", "line \(n) of \(lines)")
    }
    // CRLF line ends read as LF ones (man shutterd.8), errors and line numbers included.
    if !text.unicodeScalars.contains("\r") {
        let crlf = text.replacing("\n", with: "\r\n")
        let other = parseConfig(crlf)
        guard other == result else { broken("a CRLF config reads as its LF form", "\(result) against \(other)") }
    }
}
