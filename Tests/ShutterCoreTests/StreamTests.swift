// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ShutterCore

/// The directory of the recorded streams, beside this file.
let streamsDirectory: String = {
    let file = #filePath
    return String(file[..<file.lastIndex(of: "/")!]) + "/Streams"
}()

func streamNames() -> [String] {
    Files.list(streamsDirectory).filter { $0.hasSuffix(".stream") }.sorted()
}

@Suite("Recorded event streams")
struct StreamTests {
    @Test("each client receives exactly what the stream expects", arguments: streamNames())
    func replay(_ name: String) throws {
        let stream = try Stream(text: Files.read(streamsDirectory + "/" + name))
        #expect(!stream.clients.isEmpty, "a stream must have at least one client")
        let received = try stream.replay()
        for client in stream.clients {
            let got = (received[client] ?? []).map(summary)
            #expect(got == stream.expected[client] ?? [], "client \(client) of \(name)")
        }
    }

    @Test("every began is closed once, clientSeq has no gap, seq only grows", arguments: streamNames())
    func invariants(_ name: String) throws {
        let stream = try Stream(text: Files.read(streamsDirectory + "/" + name))
        for (client, messages) in try stream.replay() {
            var open: Set<Int64> = []
            var closed: Set<Int64> = []
            var lastSeq: Int64 = 0
            for (i, m) in messages.enumerated() {
                #expect(m["clientSeq"]?.intValue == Int64(i + 1), "clientSeq of message \(i) for \(client) in \(name)")
                let seq = m["seq"]!.intValue!
                #expect(seq > lastSeq, "seq grows for \(client) in \(name)")
                lastSeq = seq
                guard let press = m["press"]?.intValue else { continue }
                let phase = m["phase"]?.stringValue ?? (m["event"]?.stringValue == "active" ? "began" : "ended")
                if phase == "began" {
                    #expect(!open.contains(press) && !closed.contains(press), "press \(press) began twice")
                    open.insert(press)
                } else {
                    #expect(open.remove(press) != nil, "press \(press) ended without a began for \(client) in \(name)")
                    closed.insert(press)
                }
            }
            // Streams end with every key released, unplugged or shut down.
            #expect(open.isEmpty, "presses left open for \(client) in \(name): \(open)")
        }
    }

    @Test("every capture carries the full attribution")
    func attribution() throws {
        let stream = try Stream(text: Files.read(streamsDirectory + "/ab-shutter3.stream"))
        let messages = try stream.replay()["with-secondary"]!
        let first = messages[0]
        #expect(first["type"]?.stringValue == "capture")
        let device = first["device"]!
        #expect(device["name"]?.stringValue == "AB Shutter3 Keyboard")
        #expect(device["bus"]?.stringValue == "bluetooth")
        #expect(device["vendor"]?.stringValue == "2717")
        #expect(device["product"]?.stringValue == "0040")
        #expect(device["kind"]?.stringValue == "remote")
        #expect(device["uniq"]?.stringValue == "c2:1a:55:0e:b3:05")
        #expect(device["id"]?.stringValue == "bluetooth-2717-0040-c2:1a:55:0e:b3:05-ab-shutter3-keyboard")
        #expect(device["group"]?.stringValue == "bluetooth-2717-0040-c2:1a:55:0e:b3:05")
        #expect(device["node"]?.stringValue == "/dev/input/event1")
        #expect(first["key"]?["code"]?.intValue == 115)
        #expect(first["key"]?["scancode"]?.intValue == 0xC00E9)
        #expect(first["kernelTime"]?.intValue == 100_000)
        #expect(first["receiveTime"]?.intValue == 100_050)
        #expect(first["shouldPlaySound"]?.boolValue == false)
    }
}
