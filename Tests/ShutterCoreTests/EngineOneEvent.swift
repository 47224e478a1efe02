// SPDX-License-Identifier: Apache-2.0

@testable import ShutterCore

extension Engine {
    /// Feeds one event of a device as a batch of its own; returns what it produced,
    /// numbered. The daemon feeds what each read brings (`handle(_:_:now:into:)`); the
    /// tests that step through a stream event by event use this.
    func handle(_ handle: Int, _ event: RawEvent, now: Int64) -> [Occurrence] {
        var produced: [Occurrence] = []
        self.handle(handle, [event], now: now, into: &produced)
        return produced
    }
}
