// SPDX-License-Identifier: Apache-2.0

// iOS's AVCaptureEventInteraction snippet, ported line by line: a photo when a key that
// drives the primary handler comes up; volume up goes to the secondary handler, which takes
// it (without one it would fall through to primary, as on iOS). What iOS does not say is
// printed with each photo: the device and the key that fired.
//
// Usage: capture [PHOTOS]    (shutterd's socket: $SHUTTERD_SOCKET, else its default)
// Ends after PHOTOS photos; without it, runs until interrupted.
import Glibc
import ShutterClient
import Synchronization

let photos = CommandLine.arguments.dropFirst().first.flatMap { Int($0) }
let taken = Atomic(0)
let (enough, photosTaken) = AsyncStream<Void>.makeStream()

/// A line on stdout at once, into a file or a pipe too.
func say(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
}

func capturePhoto(_ event: CaptureEvent) {
    let n = taken.add(1, ordering: .relaxed).newValue
    if let photos, n > photos { return }  // enough taken: ending
    say("photo \(n): \(event.key.name) of '\(event.device.name)' [\(event.device.bus) \(event.device.id)]")
    if n == photos { photosTaken.yield() }
}

let interaction = CaptureEventInteraction(
    primary: { event in
        guard event.phase == .ended else { return }
        capturePhoto(event)
    },
    secondary: { event in
        guard event.phase == .ended else { return }
        say("secondary: \(event.key.name)")
    },
    connection: { news in
        switch news {
        case .connected(let hello): say("connected to shutterd \(hello.daemonVersion)")
        case .disconnected(let why): say("waiting for shutterd: \(why)")
        default: break
        }
    })
interaction.isEnabled = true

if photos == nil {
    await interaction.wait()
} else {
    for await _ in enough { break }
    interaction.invalidate()
}
